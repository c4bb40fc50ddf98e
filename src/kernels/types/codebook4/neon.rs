//! Codebook types on NEON: the dot per token in both builds ([`two_builds`]) and i8mm tiles,
//! the nibbles looked up in the codebook with one `tbl` per 16. Per block the integer sums and
//! the f32 steps (`sumi · (scale_w d_a)`) are the scalar twin's, so the results match it bit
//! for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers (|q| <= 127, and so are the codebooks' values: the
//! widening build sums two products in an i16) and, for tiles, an even token count. Rows
//! should have equal block counts; only the shortest row's count is used.

use std::arch::aarch64::*;
use std::marker::PhantomData;

use crate::kernels::simd::i8mm::{per_row, per_token, tile_dot, unzip_tiles, zip32};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ8_0, CodebookBlock};

/// The kernel sets of codebook type `B`.
pub(crate) struct Kernels<B>(PhantomData<B>);

impl<B: CodebookBlock> Kernels<B> {
    pub const BASE: Dense<B, BlockQ8_0> = Dense {
        dot: base::dot::<B>,
        dot_isa: "neon",
        tiles: TileSet::None,
        tiles_isa: "",
    };

    pub const DOTPROD: Dense<B, BlockQ8_0> = Dense {
        dot: dotprod::dot::<B>,
        dot_isa: "dotprod",
        tiles: TileSet::None,
        tiles_isa: "",
    };

    pub const I8MM: Dense<B, BlockQ8_0> = Dense {
        dot: dotprod::dot::<B>,
        dot_isa: "dotprod",
        tiles: tiles!(Pairs, tile, B),
        tiles_isa: "i8mm",
    };
}

/// A block's 32 codebook values: quants 0..16 (low nibbles) and 16..32 (high nibbles).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn values<B: CodebookBlock>(x: &B) -> (int8x16_t, int8x16_t) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let book = B::CODEBOOK;
        let k = vld1q_s8(book.as_ptr());
        let q = vld1q_u8(x.qs().as_ptr());
        (
            vqtbl1q_s8(k, vandq_u8(q, vdupq_n_u8(15))),
            vqtbl1q_s8(k, vshrq_n_u8(q, 4)),
        )
    }
}

two_builds!(
    /// Codebook weights × Q8_0 activations.
    base,
    dotprod,
    |_dot4, dot32| {
        /// Codebook weights × Q8_0 activations.
        ///
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot<B: CodebookBlock>(w: &[B], a: &[BlockQ8_0]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let sumi = dot32(values(x), &y.qs);
                    sum += sumi as f32 * (x.scale() * y.d.to_f32());
                }
                sum
            }
        }
    }
);

/// Codebook weights × Q8_0 activations, 2 rows × `T` tokens: per block the 2×2 tile of sums
/// times `scale_w d_a`, in block order.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<B: CodebookBlock, const T: usize>(
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
            let (v0, v1) = (values(x0), values(x1));
            let wz = zip32([v0.0, v0.1], [v1.0, v1.1]);
            let dw = per_row(x0.scale(), x1.scale());
            for p in 0..T / 2 {
                let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                let sumi = tile_dot(&wz, ya.qs.as_ptr(), yb.qs.as_ptr());
                let da = per_token(ya.d.to_f32(), yb.d.to_f32());
                let v = vmulq_f32(vcvtq_f32_s32(sumi), vmulq_f32(dw, da));
                acc[p] = vaddq_f32(acc[p], v);
            }
        }
        unzip_tiles(&acc)
    }
}
