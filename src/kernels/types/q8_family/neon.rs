//! NEON dot kernels (both builds, see [`two_builds`]) and i8mm tiles of the Q8_0-activation
//! types. Per block the integer sums are exactly the scalar twins', and the f32 steps are the
//! same (no fused multiply-add), so every result matches them bit for bit.
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
use crate::kernels::types::common_len;
use crate::quant::blocks::BlockQ8_0;

/// A 32-quant weight block as two vectors of 16 signed quants, and its scale.
pub trait Signed32: Copy {
    /// # Safety
    /// NEON.
    unsafe fn halves(&self) -> (int8x16_t, int8x16_t);
    fn scale(&self) -> f16;
}

two_builds!(
    /// `w · a`: per block the 32 products' sum, times `d_w`, times `d_a`.
    base,
    dotprod,
    |_dot4, dot32| {
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot<B: Signed32>(w: &[B], a: &[BlockQ8_0]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let sumi = dot32(x.halves(), &y.qs);
                    sum += sumi as f32 * x.scale().to_f32() * y.d.to_f32();
                }
                sum
            }
        }
    }
);

/// 2 rows × `T` tokens: every (row, token) gets `sumi * d_w * d_a` per block, in block order,
/// as the scalar kernel does.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<B: Signed32, const T: usize>(
    w: [&[B]; 2],
    a: [&[BlockQ8_0]; T],
) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (w0, w1) = (w[0][b].halves(), w[1][b].halves());
            let wz = zip32([w0.0, w0.1], [w1.0, w1.1]);
            let dw = per_row(w[0][b].scale().to_f32(), w[1][b].scale().to_f32());
            for p in 0..T / 2 {
                let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                let sumi = tile_dot(&wz, ya.qs.as_ptr(), yb.qs.as_ptr());
                let da = per_token(ya.d.to_f32(), yb.d.to_f32());
                let v = vmulq_f32(vmulq_f32(vcvtq_f32_s32(sumi), dw), da);
                acc[p] = vaddq_f32(acc[p], v);
            }
        }
        unzip_tiles(&acc)
    }
}
