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
use crate::kernels::types::{common_len, tiles, Dense};

/// The NEON kernels of float element `E`.
pub(super) struct Kernels<E: 'static>(std::marker::PhantomData<E>);

impl<E: Lanes4> Kernels<E> {
    pub(super) const DENSE: Dense<E, E> = Dense {
        dot: dot::<E>,
        dot_isa: "neon",
        tiles: tiles!(Rows2, float_tile, E),
        tiles_isa: "neon",
    };
}

/// `w · a`: 16 products per step in four f32 FMA chains, then 4 at a time, then the tail.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon")]
unsafe fn dot<E: Lanes4>(w: &[E], a: &[E]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let (pw, pa) = (w.as_ptr(), a.as_ptr());
        let mut acc = [vdupq_n_f32(0.0); 4];
        let mut i = 0;
        while i + 16 <= n {
            for (k, s) in acc.iter_mut().enumerate() {
                let o = i + 4 * k;
                *s = vfmaq_f32(*s, E::load4(pw.add(o)), E::load4(pa.add(o)));
            }
            i += 16;
        }
        while i + 4 <= n {
            acc[0] = vfmaq_f32(acc[0], E::load4(pw.add(i)), E::load4(pa.add(i)));
            i += 4;
        }
        let s = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
        let mut sum = vaddvq_f32(s);
        for j in i..n {
            sum += w[j].widen() * a[j].widen();
        }
        sum
    }
}

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
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { vld1q_f32(p) }
    }
}

impl Lanes4 for f16 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn load4(p: *const f16) -> float32x4_t {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { f16x4_to_f32(vld1_u16(p as *const u16)) }
    }
}

impl Lanes4 for bf16 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn load4(p: *const bf16) -> float32x4_t {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { bf16x4_to_f32(vld1_u16(p as *const u16)) }
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
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
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
}
