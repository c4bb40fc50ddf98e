//! Q2_K on NEON: the dot per token in both builds ([`two_builds`]): four 16-quant sub-block
//! sums per vector, times their 4-bit scales; and i8mm tiles: per sub-block the 2×2 tile of
//! sums times each row's scale. The minimums come from the activations' 16-quant sums. Integer
//! sums and f32 steps are the scalar twin's, so the results match it bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers and, for tiles, an even token count.

use std::arch::aarch64::*;

use crate::kernels::simd::i8mm::{per_row, per_row_i32, per_token, tile_dot, unzip_tiles, zip8};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ2K, BlockQ8K};

pub(super) const BASE: Dense<BlockQ2K, BlockQ8K> = Dense {
    dot: base::dot,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ2K, BlockQ8K> = Dense {
    dot: dotprod::dot,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ2K, BlockQ8K> = Dense {
    tiles: tiles!(Pairs, tile),
    tiles_isa: "i8mm",
    ..DOTPROD
};

two_builds!(
    /// Q2_K weights × Q8_K activations.
    base,
    dotprod,
    |dot4, _dot32| {
        /// Q2_K weights × Q8_K activations.
        ///
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let (m3, zero) = (vdupq_n_u8(3), vdupq_n_s32(0));
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let sc = vld1q_u8(x.scales.as_ptr());
                    let summs = min_sum(&y.bsums, vshrq_n_u8(sc, 4));
                    let scales = widen(vandq_u8(sc, vdupq_n_u8(15)));
                    let mut isum = zero;
                    // Element 128h + 32s + l is bits 2s..2s+2 of qs[32h + l], in sub-block
                    // 8h + 2s + (l >= 16).
                    for h in 0..2 {
                        let q = x.qs.as_ptr().add(32 * h);
                        let mut r = [vld1q_u8(q), vld1q_u8(q.add(16))];
                        let q8 = y.qs.as_ptr().add(128 * h);
                        let mut subs = [zero; 8];
                        for s in 0..4 {
                            for half in 0..2 {
                                let v = vreinterpretq_s8_u8(vandq_u8(r[half], m3));
                                let a = vld1q_s8(q8.add(32 * s + 16 * half));
                                subs[2 * s + half] = dot4(zero, v, a);
                            }
                            r = [vshrq_n_u8(r[0], 2), vshrq_n_u8(r[1], 2)];
                        }
                        isum = vmlaq_s32(isum, lane_sums(&subs[..4]), scales[2 * h]);
                        isum = vmlaq_s32(isum, lane_sums(&subs[4..]), scales[2 * h + 1]);
                    }
                    let dall = y.d * x.d.to_f32();
                    let dmin = y.d * x.dmin.to_f32();
                    sum += dall * vaddvq_s32(isum) as f32 - dmin * summs as f32;
                }
                sum
            }
        }
    }
);

/// Q2_K weights × Q8_K activations, 2 rows × `T` tokens: per 16-quant sub-block the 2×2 tile
/// of sums times each row's 4-bit scale, the minimums from the activations' 16-quant sums.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<const T: usize>(w: [&[BlockQ2K]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let m3 = vdupq_n_u8(3);
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (x0, x1) = (&w[0][b], &w[1][b]);
            let mut isum = [vdupq_n_s32(0); T];
            for h in 0..2 {
                let load = |x: &BlockQ2K| {
                    let q = x.qs.as_ptr().add(32 * h);
                    [vld1q_u8(q), vld1q_u8(q.add(16))]
                };
                let (mut r0, mut r1) = (load(x0), load(x1));
                for s in 0..4 {
                    for half in 0..2 {
                        let two_bits = |v: uint8x16_t| vreinterpretq_s8_u8(vandq_u8(v, m3));
                        let wz = zip8(two_bits(r0[half]), two_bits(r1[half]));
                        let k = 8 * h + 2 * s + half;
                        let scale =
                            per_row_i32((x0.scales[k] & 15) as i32, (x1.scales[k] & 15) as i32);
                        let at = 128 * h + 32 * s + 16 * half;
                        for p in 0..T / 2 {
                            let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                            let sums =
                                tile_dot(&wz, ya.qs.as_ptr().add(at), yb.qs.as_ptr().add(at));
                            isum[p] = vmlaq_s32(isum[p], sums, scale);
                        }
                    }
                    r0 = [vshrq_n_u8(r0[0], 2), vshrq_n_u8(r0[1], 2)];
                    r1 = [vshrq_n_u8(r1[0], 2), vshrq_n_u8(r1[1], 2)];
                }
            }
            let mins = |x: &BlockQ2K| vshrq_n_u8(vld1q_u8(x.scales.as_ptr()), 4);
            let (min0, min1) = (mins(x0), mins(x1));
            let (dw, dmin) = (
                per_row(x0.d.to_f32(), x1.d.to_f32()),
                per_row(x0.dmin.to_f32(), x1.dmin.to_f32()),
            );
            for p in 0..T / 2 {
                let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                let summs = [
                    min_sum(&ya.bsums, min0),
                    min_sum(&yb.bsums, min0),
                    min_sum(&ya.bsums, min1),
                    min_sum(&yb.bsums, min1),
                ];
                let summs = vcvtq_f32_s32(vld1q_s32(summs.as_ptr()));
                let da = per_token(ya.d, yb.d);
                let scaled = vmulq_f32(vmulq_f32(dw, da), vcvtq_f32_s32(isum[p]));
                let min = vmulq_f32(vmulq_f32(dmin, da), summs);
                acc[p] = vaddq_f32(acc[p], vsubq_f32(scaled, min));
            }
        }
        unzip_tiles(&acc)
    }
}

/// `[Σ v[0], Σ v[1], Σ v[2], Σ v[3]]`: four sub-blocks' sums in one vector.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn lane_sums(v: &[int32x4_t]) -> int32x4_t {
    vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]))
}

/// 16 scales `0..16` as four i32 vectors of 4.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn widen(sc: uint8x16_t) -> [int32x4_t; 4] {
    let (lo, hi) = (vmovl_u8(vget_low_u8(sc)), vmovl_high_u8(sc));
    [
        vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))),
        vreinterpretq_s32_u32(vmovl_high_u16(lo)),
        vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))),
        vreinterpretq_s32_u32(vmovl_high_u16(hi)),
    ]
}

/// `Σ bsums[j] · mins[j]` over the 16 sub-blocks (mins `0..16`), in i32.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn min_sum(bsums: &[i16; 16], mins: uint8x16_t) -> i32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let (b0, b1) = (vld1q_s16(bsums.as_ptr()), vld1q_s16(bsums.as_ptr().add(8)));
        let m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
        let m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
        let s = vmull_s16(vget_low_s16(b0), vget_low_s16(m0));
        let s = vmlal_high_s16(s, b0, m0);
        let s = vmlal_s16(s, vget_low_s16(b1), vget_low_s16(m1));
        vaddvq_s32(vmlal_high_s16(s, b1, m1))
    }
}
