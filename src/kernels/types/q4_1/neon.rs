//! Q4_1 on NEON, and the kernels it shares with Q5_1 (blocks `w = d * q + m` with unsigned
//! quants, [`Unsigned32`]): the dot per token in both builds ([`two_builds`]) and i8mm tiles.
//! Per block the integer sums (`Σ q a` and `Σ a`) and the f32 steps are the scalar twins', so
//! the results match them bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers (|q| <= 127: the widening build sums two products
//! in an i16) and, for tiles, an even token count. Rows should have equal block counts; only
//! the shortest row's count is used.

use std::arch::aarch64::*;

use half::f16;

use crate::kernels::simd::i8mm::{per_row, per_token, tile_dot, unzip_tiles, zip32};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ4_1, BlockQ8_0};

/// A 32-quant block `w = d * q + m` with `0 <= q < 32`: its quants as two vectors of 16, its
/// scale and its minimum.
pub trait Unsigned32: Copy {
    /// # Safety
    /// NEON.
    unsafe fn halves(&self) -> (int8x16_t, int8x16_t);
    fn scale(&self) -> f16;
    fn minimum(&self) -> f16;
}

impl Unsigned32 for BlockQ4_1 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn halves(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let q = vld1q_u8(self.qs.as_ptr());
            (
                vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))),
                vreinterpretq_s8_u8(vshrq_n_u8(q, 4)),
            )
        }
    }
    fn scale(&self) -> f16 {
        self.d
    }
    fn minimum(&self) -> f16 {
        self.m
    }
}

pub(super) const BASE: Dense<BlockQ4_1, BlockQ8_0> = Dense {
    dot: base::dot::<BlockQ4_1>,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ4_1, BlockQ8_0> = Dense {
    dot: dotprod::dot::<BlockQ4_1>,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ4_1, BlockQ8_0> = Dense {
    tiles: tiles!(Pairs, tile, BlockQ4_1),
    tiles_isa: "i8mm",
    ..DOTPROD
};

/// The sum of a block's 32 activations (each half's 16 fit an i16).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn act_sum(a: &[i8; 32]) -> i32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let p = a.as_ptr();
        vaddlvq_s8(vld1q_s8(p)) as i32 + vaddlvq_s8(vld1q_s8(p.add(16))) as i32
    }
}

two_builds!(
    /// `w · a`: per block `Σ q a · (d_w d_a) + m · (d_a Σ a)`.
    base,
    dotprod,
    |_dot4, dot32| {
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot<B: Unsigned32>(w: &[B], a: &[BlockQ8_0]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let sumi = dot32(x.halves(), &y.qs);
                    let suma = act_sum(&y.qs);
                    let dy = y.d.to_f32();
                    sum += sumi as f32 * (x.scale().to_f32() * dy)
                        + x.minimum().to_f32() * (dy * suma as f32);
                }
                sum
            }
        }
    }
);

/// 2 rows × `T` tokens: every (row, token) gets the scalar kernel's per-block terms, in block
/// order.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<B: Unsigned32, const T: usize>(
    w: [&[B]; 2],
    a: [&[BlockQ8_0]; T],
) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (x0, x1) = (&w[0][b], &w[1][b]);
            let (h0, h1) = (x0.halves(), x1.halves());
            let wz = zip32([h0.0, h0.1], [h1.0, h1.1]);
            let dw = per_row(x0.scale().to_f32(), x1.scale().to_f32());
            let mw = per_row(x0.minimum().to_f32(), x1.minimum().to_f32());
            for p in 0..T / 2 {
                let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                let sumi = tile_dot(&wz, ya.qs.as_ptr(), yb.qs.as_ptr());
                let da = per_token(ya.d.to_f32(), yb.d.to_f32());
                let suma = per_token(act_sum(&ya.qs) as f32, act_sum(&yb.qs) as f32);
                let scaled = vmulq_f32(vcvtq_f32_s32(sumi), vmulq_f32(dw, da));
                let min = vmulq_f32(mw, vmulq_f32(da, suma));
                acc[p] = vaddq_f32(acc[p], vaddq_f32(scaled, min));
            }
        }
        unzip_tiles(&acc)
    }
}
