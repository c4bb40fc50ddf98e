//! Q4_K on NEON: the dot per token in both builds ([`two_builds`]), and i8mm tiles: per
//! 32-quant sub-block the 2×2 tile of sums times each row's 6-bit scale, the minimums from
//! the activations' 16-quant sums. Integer sums and f32 steps are the scalar twin's, so the
//! results match it bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers and, for tiles, an even token count.

use std::arch::aarch64::*;

use crate::kernels::simd::i8mm::{per_row, per_row_i32, per_token, tile_dot, unzip_tiles, zip8};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ4K, BlockQ8K};
use crate::quant::dequant_k::unpack_k4_scales;

pub(super) const BASE: Dense<BlockQ4K, BlockQ8K> = Dense {
    dot: base::dot,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ4K, BlockQ8K> = Dense {
    dot: dotprod::dot,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ4K, BlockQ8K> = Dense {
    tiles: tiles!(Pairs, tile),
    tiles_isa: "i8mm",
    ..DOTPROD
};

two_builds!(
    /// Q4_K weights × Q8_K activations.
    base,
    dotprod,
    |_dot4, dot32| {
        /// Q4_K weights × Q8_K activations.
        ///
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let m4 = vdupq_n_u8(15);
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let (sc, m) = unpack_k4_scales(&x.scales);
                    let mut isum = 0i32;
                    for j in 0..4 {
                        let q = x.qs.as_ptr().add(32 * j);
                        let (q0, q1) = (vld1q_u8(q), vld1q_u8(q.add(16)));
                        let nib = |v: uint8x16_t| vreinterpretq_s8_u8(vandq_u8(v, m4));
                        let top = |v: uint8x16_t| vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                        let a = y.qs.as_ptr().add(64 * j) as *const [i8; 32];
                        let lo = dot32((nib(q0), nib(q1)), &*a);
                        let hi = dot32((top(q0), top(q1)), &*a.add(1));
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

/// Q4_K weights × Q8_K activations, 2 rows × `T` tokens: per 32-quant sub-block the 2×2 tile
/// of sums times each row's 6-bit scale, the minimums from the activations' 16-quant sums.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<const T: usize>(w: [&[BlockQ4K]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let m4 = vdupq_n_u8(15);
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (x0, x1) = (&w[0][b], &w[1][b]);
            let ((sc0, m0), (sc1, m1)) =
                (unpack_k4_scales(&x0.scales), unpack_k4_scales(&x1.scales));
            let mut isum = [vdupq_n_s32(0); T];
            for j in 0..4 {
                let (q0, q1) = (x0.qs.as_ptr().add(32 * j), x1.qs.as_ptr().add(32 * j));
                let (r0, r1) = (
                    [vld1q_u8(q0), vld1q_u8(q0.add(16))],
                    [vld1q_u8(q1), vld1q_u8(q1.add(16))],
                );
                let nib = |v: uint8x16_t| vreinterpretq_s8_u8(vandq_u8(v, m4));
                let top = |v: uint8x16_t| vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                // Sub-block 2j from the low nibbles, 2j + 1 from the high ones.
                let lo = [zip8(nib(r0[0]), nib(r1[0])), zip8(nib(r0[1]), nib(r1[1]))];
                let hi = [zip8(top(r0[0]), top(r1[0])), zip8(top(r0[1]), top(r1[1]))];
                let subs = [
                    ([lo[0][0], lo[0][1], lo[1][0], lo[1][1]], 2 * j),
                    ([hi[0][0], hi[0][1], hi[1][0], hi[1][1]], 2 * j + 1),
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

/// A Q4_K block's 8 minimums as i16 lanes.
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
