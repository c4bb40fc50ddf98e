//! Q6_K on NEON: the dot per token in both builds ([`two_builds`]), and i8mm tiles: per
//! 16-quant sub-block the 2×2 tile of sums times each row's signed 8-bit scale. Integer sums
//! and f32 steps are the scalar twin's, so the results match it bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers and, for tiles, an even token count.

use std::arch::aarch64::*;

use crate::kernels::simd::i8mm::{
    add_q8k_block, per_row, per_row_i32, tile_dot, unzip_tiles, zip8,
};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ6K, BlockQ8K};

pub(super) const BASE: Dense<BlockQ6K, BlockQ8K> = Dense {
    dot: base::dot,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ6K, BlockQ8K> = Dense {
    dot: dotprod::dot,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ6K, BlockQ8K> = Dense {
    tiles: tiles!(Pairs, tile),
    tiles_isa: "i8mm",
    ..DOTPROD
};

two_builds!(
    /// Q6_K weights × Q8_K activations.
    base,
    dotprod,
    |dot4, _dot32| {
        /// Q6_K weights × Q8_K activations.
        ///
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let (m4, m2, off) = (vdupq_n_u8(15), vdupq_n_u8(0x30), vdupq_n_s8(32));
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let mut isum = 0i32;
                    for h in 0..2 {
                        let ql = x.ql.as_ptr().add(64 * h);
                        let qh = x.qh.as_ptr().add(32 * h);
                        let q8 = y.qs.as_ptr().add(128 * h);
                        // 16 lanes at a time: l = 0..16 and 16..32 of the four runs of 32.
                        for half in 0..2 {
                            let l0 = vld1q_u8(ql.add(16 * half));
                            let l1 = vld1q_u8(ql.add(32 + 16 * half));
                            let hb = vld1q_u8(qh.add(16 * half));
                            let q6 = |low: uint8x16_t, shift_hi: uint8x16_t| {
                                let v = vorrq_u8(low, vandq_u8(shift_hi, m2));
                                vsubq_s8(vreinterpretq_s8_u8(v), off)
                            };
                            let runs = [
                                q6(vandq_u8(l0, m4), vshlq_n_u8(hb, 4)),
                                q6(vandq_u8(l1, m4), vshlq_n_u8(hb, 2)),
                                q6(vshrq_n_u8(l0, 4), hb),
                                q6(vshrq_n_u8(l1, 4), vshrq_n_u8(hb, 2)),
                            ];
                            for (run, q) in runs.into_iter().enumerate() {
                                let a = vld1q_s8(q8.add(32 * run + 16 * half));
                                let s = vaddvq_s32(dot4(vdupq_n_s32(0), q, a));
                                isum += x.scales[8 * h + 2 * run + half] as i32 * s;
                            }
                        }
                    }
                    sum += x.d.to_f32() * y.d * isum as f32;
                }
                sum
            }
        }
    }
);

/// Q6_K weights × Q8_K activations, 2 rows × `T` tokens: per 16-quant sub-block the 2×2 tile
/// of sums times each row's signed 8-bit scale.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<const T: usize>(w: [&[BlockQ6K]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let (m4, m2, off) = (vdupq_n_u8(15), vdupq_n_u8(0x30), vdupq_n_s8(32));
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (x0, x1) = (&w[0][b], &w[1][b]);
            let mut isum = [vdupq_n_s32(0); T];
            for h in 0..2 {
                // Quants l = 16 * half .. + 16 of the four runs of 32 in this half of the block.
                for half in 0..2 {
                    let runs = |x: &BlockQ6K| {
                        let ql = x.ql.as_ptr().add(64 * h + 16 * half);
                        let hb = vld1q_u8(x.qh.as_ptr().add(32 * h + 16 * half));
                        let (l0, l1) = (vld1q_u8(ql), vld1q_u8(ql.add(32)));
                        let q6 = |low: uint8x16_t, shifted_hi: uint8x16_t| {
                            let v = vorrq_u8(low, vandq_u8(shifted_hi, m2));
                            vsubq_s8(vreinterpretq_s8_u8(v), off)
                        };
                        [
                            q6(vandq_u8(l0, m4), vshlq_n_u8(hb, 4)),
                            q6(vandq_u8(l1, m4), vshlq_n_u8(hb, 2)),
                            q6(vshrq_n_u8(l0, 4), hb),
                            q6(vshrq_n_u8(l1, 4), vshrq_n_u8(hb, 2)),
                        ]
                    };
                    let (r0, r1) = (runs(x0), runs(x1));
                    for run in 0..4 {
                        let wz = zip8(r0[run], r1[run]);
                        let s = 8 * h + 2 * run + half;
                        let scale = per_row_i32(x0.scales[s] as i32, x1.scales[s] as i32);
                        let at = 128 * h + 32 * run + 16 * half;
                        for p in 0..T / 2 {
                            let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                            let sums =
                                tile_dot(&wz, ya.qs.as_ptr().add(at), yb.qs.as_ptr().add(at));
                            isum[p] = vmlaq_s32(isum[p], sums, scale);
                        }
                    }
                }
            }
            let dw = per_row(x0.d.to_f32(), x1.d.to_f32());
            add_q8k_block(&mut acc, &isum, dw, &a, b);
        }
        unzip_tiles(&acc)
    }
}
