//! IQ4_XS on NEON: the dot per token in both builds ([`two_builds`]): four 32-quant sub-block
//! sums per vector, times their 6-bit scales; and i8mm tiles: per sub-block the 2×2 tile of
//! sums times each row's scale. The nibbles are looked up in IQ4_NL's codebook with one `tbl`
//! per 16. Integer sums and f32 steps are the scalar twin's, so the results match it bit for
//! bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers (|q| <= 127, and so are the codebook's values: the
//! widening build sums two products in an i16) and, for tiles, an even token count.

use std::arch::aarch64::*;

use crate::kernels::simd::i8mm::{
    add_q8k_block, per_row, per_row_i32, tile_dot, unzip_tiles, zip32,
};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockIQ4XS, BlockQ8K, KVALUES_IQ4NL};
use crate::quant::dequant::iq4_xs_scale;

pub(super) const BASE: Dense<BlockIQ4XS, BlockQ8K> = Dense {
    dot: base::dot,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockIQ4XS, BlockQ8K> = Dense {
    dot: dotprod::dot,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockIQ4XS, BlockQ8K> = Dense {
    tiles: tiles!(Pairs, tile),
    tiles_isa: "i8mm",
    ..DOTPROD
};

/// Sub-block `i`'s 32 codebook values: quants 0..16 (low nibbles of `qs[16i..16i + 16]`) and
/// 16..32 (high nibbles).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn values(x: &BlockIQ4XS, i: usize) -> [int8x16_t; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let k = vld1q_s8(KVALUES_IQ4NL.as_ptr());
        let q = vld1q_u8(x.qs.as_ptr().add(16 * i));
        [
            vqtbl1q_s8(k, vandq_u8(q, vdupq_n_u8(15))),
            vqtbl1q_s8(k, vshrq_n_u8(q, 4)),
        ]
    }
}

/// The 8 sub-block scales (`-32..32`).
#[inline]
fn scales(x: &BlockIQ4XS) -> [i32; 8] {
    let mut sc = [0; 8];
    for (i, s) in sc.iter_mut().enumerate() {
        *s = iq4_xs_scale(x, i);
    }
    sc
}

two_builds!(
    /// IQ4_XS weights × Q8_K activations.
    base,
    dotprod,
    |dot4, _dot32| {
        /// IQ4_XS weights × Q8_K activations.
        ///
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot(w: &[BlockIQ4XS], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let zero = vdupq_n_s32(0);
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let sc = scales(x);
                    let mut isum = zero;
                    for g in 0..2 {
                        let mut subs = [zero; 4];
                        for (j, s) in subs.iter_mut().enumerate() {
                            let i = 4 * g + j;
                            let v = values(x, i);
                            let q8 = y.qs.as_ptr().add(32 * i);
                            let lo = dot4(zero, v[0], vld1q_s8(q8));
                            *s = dot4(lo, v[1], vld1q_s8(q8.add(16)));
                        }
                        let lanes = vpaddq_s32(
                            vpaddq_s32(subs[0], subs[1]),
                            vpaddq_s32(subs[2], subs[3]),
                        );
                        isum = vmlaq_s32(isum, lanes, vld1q_s32(sc.as_ptr().add(4 * g)));
                    }
                    sum += x.d.to_f32() * y.d * vaddvq_s32(isum) as f32;
                }
                sum
            }
        }
    }
);

/// IQ4_XS weights × Q8_K activations, 2 rows × `T` tokens: per 32-quant sub-block the 2×2
/// tile of sums times each row's 6-bit scale.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<const T: usize>(w: [&[BlockIQ4XS]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (x0, x1) = (&w[0][b], &w[1][b]);
            let (sc0, sc1) = (scales(x0), scales(x1));
            let mut isum = [vdupq_n_s32(0); T];
            for i in 0..8 {
                let (v0, v1) = (values(x0, i), values(x1, i));
                let wz = zip32(v0, v1);
                let scale = per_row_i32(sc0[i], sc1[i]);
                for p in 0..T / 2 {
                    let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                    let at = 32 * i;
                    let sums = tile_dot(&wz, ya.qs.as_ptr().add(at), yb.qs.as_ptr().add(at));
                    isum[p] = vmlaq_s32(isum[p], sums, scale);
                }
            }
            let dw = per_row(x0.d.to_f32(), x1.d.to_f32());
            add_q8k_block(&mut acc, &isum, dw, &a, b);
        }
        unzip_tiles(&acc)
    }
}
