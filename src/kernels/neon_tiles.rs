//! aarch64 NEON tile kernels for the float weight types (F32, F16, BF16): `R` weight rows ×
//! `T` tokens per call. Each 4-element slice of a weight row is loaded and widened to f32
//! once for all `T` tokens, and each token's slice once for all `R` rows, where the dot
//! kernels of [`super::neon`] widen both operands for every (row, token) pair. The products
//! are theirs (exact widening, one FMA per element); only the order of the f32 sums differs.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (every aarch64 core). Rows should have equal lengths;
//! only the shortest row's length is used.

use std::arch::aarch64::*;

use half::{bf16, f16};

use super::neon::{bf16x4_to_f32, f16x4_to_f32};
use super::{common_len, Widen};

/// 4 values of a float weight type, widened to f32 exactly.
pub(super) trait Lanes4: Widen {
    /// # Safety
    /// NEON; 4 values readable at `p`.
    unsafe fn load4(p: *const Self) -> float32x4_t;
}

impl Lanes4 for f32 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn load4(p: *const f32) -> float32x4_t {
        vld1q_f32(p)
    }
}

impl Lanes4 for f16 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn load4(p: *const f16) -> float32x4_t {
        f16x4_to_f32(vld1_u16(p as *const u16))
    }
}

impl Lanes4 for bf16 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn load4(p: *const bf16) -> float32x4_t {
        bf16x4_to_f32(vld1_u16(p as *const u16))
    }
}

/// `R` rows × `T` tokens of a float type `E` (f32, f16, bf16): `R · T` accumulators (`R = 2`,
/// `T = 8` keeps 19 of the 32 vector registers busy); the last `n % 4` elements go through a
/// scalar loop, as in the dot kernels.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon")]
pub(super) unsafe fn float_tile<E: Lanes4, const R: usize, const T: usize>(
    w: [&[E]; R],
    a: [&[E]; T],
) -> [[f32; T]; R] {
    let n = common_len(&w, &a);
    let mut acc = [[vdupq_n_f32(0.0); T]; R];
    let mut i = 0;
    while i + 4 <= n {
        let x: [float32x4_t; R] = std::array::from_fn(|r| E::load4(w[r].as_ptr().add(i)));
        for t in 0..T {
            let y = E::load4(a[t].as_ptr().add(i));
            for r in 0..R {
                acc[r][t] = vfmaq_f32(acc[r][t], x[r], y);
            }
        }
        i += 4;
    }
    let mut out = [[0.0; T]; R];
    for r in 0..R {
        for t in 0..T {
            out[r][t] = vaddvq_f32(acc[r][t]);
            for j in i..n {
                out[r][t] += w[r][j].widen() * a[t][j].widen();
            }
        }
    }
    out
}
