//! Q5_K on NEON: Q4_K's kernels with the fifth bits ORed in. The dot per token in both builds
//! ([`two_builds`]), and i8mm tiles: per 32-quant sub-block the 2×2 tile of sums times each
//! row's 6-bit scale, the minimums from the activations' 16-quant sums. Integer sums and f32
//! steps are the scalar twin's, so the results match it bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers (|q| <= 127: the widening build sums two products
//! in an i16) and, for tiles, an even token count.

use std::arch::aarch64::*;

use crate::kernels::simd::i8mm::{per_row, per_row_i32, per_token, tile_dot, unzip_tiles, zip8};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ5K, BlockQ8K};
use crate::quant::dequant_k::unpack_k4_scales;

pub(super) const BASE: Dense<BlockQ5K, BlockQ8K> = Dense {
    dot: base::dot,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ5K, BlockQ8K> = Dense {
    dot: dotprod::dot,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ5K, BlockQ8K> = Dense {
    tiles: tiles!(Pairs, tile),
    tiles_isa: "i8mm",
    ..DOTPROD
};

/// Sub-blocks `2j` (low nibbles of `qs[32j..32j + 32]`) and `2j + 1` (high nibbles) of a
/// block, each as two vectors of 16 quants in `0..32`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn sub_pair(x: &BlockQ5K, j: usize) -> ([int8x16_t; 2], [int8x16_t; 2]) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let q = x.qs.as_ptr().add(32 * j);
        let (q0, q1) = (vld1q_u8(q), vld1q_u8(q.add(16)));
        // Bits 2j and 2j + 1 of qh[l] are the fifth bits of quant l of the two sub-blocks.
        let shift = vdupq_n_s8(-2 * j as i8);
        let h0 = vshlq_u8(vld1q_u8(x.qh.as_ptr()), shift);
        let h1 = vshlq_u8(vld1q_u8(x.qh.as_ptr().add(16)), shift);
        let (m4, b4) = (vdupq_n_u8(15), vdupq_n_u8(0x10));
        let lo = |q: uint8x16_t, h: uint8x16_t| {
            vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), vandq_u8(vshlq_n_u8(h, 4), b4)))
        };
        let hi = |q: uint8x16_t, h: uint8x16_t| {
            vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(vshlq_n_u8(h, 3), b4)))
        };
        ([lo(q0, h0), lo(q1, h1)], [hi(q0, h0), hi(q1, h1)])
    }
}

two_builds!(
    /// Q5_K weights × Q8_K activations.
    base,
    dotprod,
    |_dot4, dot32| {
        /// Q5_K weights × Q8_K activations.
        ///
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let (sc, m) = unpack_k4_scales(&x.scales);
                    let mut isum = 0i32;
                    for j in 0..4 {
                        let (lo, hi) = sub_pair(x, j);
                        let a = y.qs.as_ptr().add(64 * j) as *const [i8; 32];
                        let lo = dot32((lo[0], lo[1]), &*a);
                        let hi = dot32((hi[0], hi[1]), &*a.add(1));
                        isum += sc[2 * j] as i32 * lo + sc[2 * j + 1] as i32 * hi;
                    }
                    let summ: i32 = (0..16).map(|j| y.bsums[j] as i32 * m[j / 2] as i32).sum();
                    sum += x.d.to_f32() * y.d * isum as f32 - x.dmin.to_f32() * y.d * summ as f32;
                }
                sum
            }
        }
    }
);

/// Q5_K weights × Q8_K activations, 2 rows × `T` tokens: per 32-quant sub-block the 2×2 tile
/// of sums times each row's 6-bit scale, the minimums from the activations' 16-quant sums.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<const T: usize>(w: [&[BlockQ5K]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (x0, x1) = (&w[0][b], &w[1][b]);
            let ((sc0, m0), (sc1, m1)) =
                (unpack_k4_scales(&x0.scales), unpack_k4_scales(&x1.scales));
            let mut isum = [vdupq_n_s32(0); T];
            for j in 0..4 {
                let ((lo0, hi0), (lo1, hi1)) = (sub_pair(x0, j), sub_pair(x1, j));
                let (lz, hz) = (
                    [zip8(lo0[0], lo1[0]), zip8(lo0[1], lo1[1])],
                    [zip8(hi0[0], hi1[0]), zip8(hi0[1], hi1[1])],
                );
                let subs = [
                    ([lz[0][0], lz[0][1], lz[1][0], lz[1][1]], 2 * j),
                    ([hz[0][0], hz[0][1], hz[1][0], hz[1][1]], 2 * j + 1),
                ];
                for (wz, s) in subs {
                    let scale = per_row_i32(sc0[s] as i32, sc1[s] as i32);
                    for p in 0..T / 2 {
                        let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                        let off = 32 * s;
                        let sums = tile_dot(&wz, ya.qs.as_ptr().add(off), yb.qs.as_ptr().add(off));
                        isum[p] = vmlaq_s32(isum[p], sums, scale);
                    }
                }
            }
            // Minimums: sum over sub-blocks of (the activations' 32-quant sum) × min, per pair.
            let mins = [mins16(&m0), mins16(&m1)];
            let (dw, dmin) = (
                per_row(x0.d.to_f32(), x1.d.to_f32()),
                per_row(x0.dmin.to_f32(), x1.dmin.to_f32()),
            );
            for p in 0..T / 2 {
                let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                let (sa, sb) = (sub_sums(&ya.bsums), sub_sums(&yb.bsums));
                let summ = [
                    min_dot(sa, mins[0]),
                    min_dot(sb, mins[0]),
                    min_dot(sa, mins[1]),
                    min_dot(sb, mins[1]),
                ];
                let summ = vcvtq_f32_s32(vld1q_s32(summ.as_ptr()));
                let da = per_token(ya.d, yb.d);
                let scaled = vmulq_f32(vmulq_f32(dw, da), vcvtq_f32_s32(isum[p]));
                let min = vmulq_f32(vmulq_f32(dmin, da), summ);
                acc[p] = vaddq_f32(acc[p], vsubq_f32(scaled, min));
            }
        }
        unzip_tiles(&acc)
    }
}

/// A block's 8 minimums as i16 lanes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn mins16(m: &[u8; 8]) -> int16x8_t {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m.as_ptr()))) }
}

/// The 8 sums of 32 activations from the 16 sums of 16 (each |sum| <= 32 * 127: fits i16).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn sub_sums(bsums: &[i16; 16]) -> int16x8_t {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { vpaddq_s16(vld1q_s16(bsums.as_ptr()), vld1q_s16(bsums.as_ptr().add(8))) }
}

/// `sum(s[i] * m[i])` in i32.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn min_dot(s: int16x8_t, m: int16x8_t) -> i32 {
    let lo = vmull_s16(vget_low_s16(s), vget_low_s16(m));
    vaddvq_s32(vmlal_high_s16(lo, s, m))
}
