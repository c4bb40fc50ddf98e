//! The float types on NEON (every aarch64 path): dot kernels of 16 products per step in four
//! f32 FMA chains, and `R` rows × `T` tokens tiles that widen each 4-element slice of a row
//! once for all tokens. Results match the scalar twin within f32 rounding.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON. Tile rows should have equal lengths; only the
//! shortest row's length is used.

use std::arch::aarch64::*;

use half::{bf16, f16};

use super::Widen;
use crate::kernels::simd::neon::{bf16x4_to_f32, f16x4_to_f32};
use crate::kernels::types::{common_len, tiles, Dense, DotFn};

/// The NEON kernels of float element `E`.
pub(super) struct Kernels<E: 'static>(std::marker::PhantomData<E>);

/// The element types' dot kernels.
pub(super) trait Dot: Lanes4 + 'static {
    const DOT: DotFn<Self, Self>;
}

impl Dot for f16 {
    const DOT: DotFn<f16, f16> = vec_dot_f16_f16;
}

impl Dot for bf16 {
    const DOT: DotFn<bf16, bf16> = vec_dot_bf16_bf16;
}

impl Dot for f32 {
    const DOT: DotFn<f32, f32> = vec_dot_f32_f32;
}

impl<E: Dot> Kernels<E> {
    pub(super) const DENSE: Dense<E, E> = Dense {
        dot: E::DOT,
        dot_isa: "neon",
        tiles: tiles!(Rows2, float_tile, E),
        tiles_isa: "neon",
    };
}

/// The float dot kernels: 16 products per step in four f32 FMA chains, then the tail. Their
/// sums are ordered differently from the scalar twins' f64 sums, so they match within f32
/// rounding (tested), like the AVX2 ones.
macro_rules! neon_float_dot {
    ($(#[$doc:meta])* $name:ident, $T:ty, |$p:ident| $load4:expr, $to_f32:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// NEON (every aarch64 core).
        #[target_feature(enable = "neon")]
        pub unsafe fn $name(w: &[$T], a: &[$T]) -> f32 {
            let n = w.len().min(a.len());
            let load = |$p: *const $T| -> float32x4_t { $load4 };
            let (pw, pa) = (w.as_ptr(), a.as_ptr());
            let mut acc = [vdupq_n_f32(0.0); 4];
            let mut i = 0;
            while i + 16 <= n {
                for (k, s) in acc.iter_mut().enumerate() {
                    let o = i + 4 * k;
                    *s = vfmaq_f32(*s, load(pw.add(o)), load(pa.add(o)));
                }
                i += 16;
            }
            while i + 4 <= n {
                acc[0] = vfmaq_f32(acc[0], load(pw.add(i)), load(pa.add(i)));
                i += 4;
            }
            let s = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
            let mut sum = vaddvq_f32(s);
            let to_f32: fn($T) -> f32 = $to_f32;
            for j in i..n {
                sum += to_f32(w[j]) * to_f32(a[j]);
            }
            sum
        }
    };
}

neon_float_dot!(
    /// F16 weights × F16 activations.
    vec_dot_f16_f16,
    half::f16,
    |p| f16x4_to_f32(vld1_u16(p as *const u16)),
    |x| x.to_f32()
);
neon_float_dot!(
    /// BF16 weights × BF16 activations.
    vec_dot_bf16_bf16,
    half::bf16,
    |p| bf16x4_to_f32(vld1_u16(p as *const u16)),
    |x| x.to_f32()
);
neon_float_dot!(
    /// F32 × F32.
    vec_dot_f32_f32,
    f32,
    |p| vld1q_f32(p),
    |x| x
);

/// 4 values of a float weight type, widened to f32 exactly.
pub trait Lanes4: Widen {
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
pub unsafe fn float_tile<E: Lanes4, const R: usize, const T: usize>(
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
