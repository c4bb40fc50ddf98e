//! The float types on AVX-512: dot kernels on 16 lanes, and `R` rows × `T` tokens tiles (`R =
//! 2`, `T = 8` keeps 19 of the 32 registers busy) that widen each 16-element slice of a row
//! once for all tokens; the last partial slice is a masked load rather than a scalar loop.
//! Results match the scalar twin within f32 rounding.
//!
//! # Safety
//! Every `pub unsafe fn` requires the AVX-512 path's features. Tile rows should have equal
//! lengths; only the shortest row's length is used.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::Widen;
use crate::kernels::simd::avx512::{bf16_widen16, tf};
use crate::kernels::types::{common_len, tiles, Dense};

/// The AVX-512 kernels of float element `E`.
pub(super) struct Kernels<E: 'static>(std::marker::PhantomData<E>);

impl<E: Lanes16> Kernels<E> {
    pub(super) const DENSE: Dense<E, E> = Dense {
        dot: dot::<E>,
        dot_isa: "avx512",
        tiles: tiles!(Rows2, float_tile, E),
        tiles_isa: "avx512",
    };
}

tf! {
/// `w · a`: 64 products per step in four f32 FMA chains, then 16 at a time, then the tail.
///
/// # Safety
/// See the module docs.
unsafe fn dot<E: Lanes16>(w: &[E], a: &[E]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let (pw, pa) = (w.as_ptr(), a.as_ptr());
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut i = 0;
        while i + 64 <= n {
            for (k, s) in acc.iter_mut().enumerate() {
                let o = i + 16 * k;
                *s = _mm512_fmadd_ps(E::load16(pw.add(o), 16), E::load16(pa.add(o), 16), *s);
            }
            i += 64;
        }
        while i + 16 <= n {
            acc[0] = _mm512_fmadd_ps(E::load16(pw.add(i), 16), E::load16(pa.add(i), 16), acc[0]);
            i += 16;
        }
        let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        let mut sum = _mm512_reduce_add_ps(s);
        for j in i..n {
            sum += w[j].widen() * a[j].widen();
        }
        sum
    }
}
}

/// 16 values from `p`, or the first `n < 16` of them (the rest zero), as f32.
pub trait Lanes16: Widen {
    /// # Safety
    /// AVX-512 (the AVX-512 path); `min(n, 16)` values readable at `p`.
    unsafe fn load16(p: *const Self, n: usize) -> __m512;
}

/// Lanes `0..n` set, for the masked loads of a partial slice.
#[inline]
fn first(n: usize) -> __mmask16 {
    if n >= 16 {
        u16::MAX
    } else {
        (1u16 << n) - 1
    }
}

tf! {
/// 16 halves (u16 lanes), masked to the first `n`.
#[inline]
unsafe fn halves16(p: *const u16, n: usize) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        _mm256_maskz_loadu_epi16(first(n), p as *const i16)
    }
}
}

impl Lanes16 for f32 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn load16(p: *const f32, n: usize) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm512_maskz_loadu_ps(first(n), p) }
    }
}

impl Lanes16 for f16 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn load16(p: *const f16, n: usize) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm512_cvtph_ps(halves16(p as *const u16, n)) }
    }
}

impl Lanes16 for bf16 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn load16(p: *const bf16, n: usize) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { bf16_widen16(halves16(p as *const u16, n)) }
    }
}

tf! {
/// `R` rows × `T` tokens of a float type `E` (f32, f16, bf16): `R · T` accumulators of 16
/// lanes, so `R = 2`, `T = 8` keeps 19 of the 32 registers busy.
///
/// # Safety
/// See the module docs.
pub unsafe fn float_tile<E: Lanes16, const R: usize, const T: usize>(
    w: [&[E]; R],
    a: [&[E]; T],
) -> [[f32; T]; R] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = common_len(&w, &a);
        let mut acc = [[_mm512_setzero_ps(); T]; R];
        let mut i = 0;
        while i < n {
            let left = n - i;
            let x: [__m512; R] = std::array::from_fn(|r| E::load16(w[r].as_ptr().add(i), left));
            for t in 0..T {
                let y = E::load16(a[t].as_ptr().add(i), left);
                for r in 0..R {
                    acc[r][t] = _mm512_fmadd_ps(x[r], y, acc[r][t]);
                }
            }
            i += 16;
        }
        let mut out = [[0.0; T]; R];
        for r in 0..R {
            for t in 0..T {
                out[r][t] = _mm512_reduce_add_ps(acc[r][t]);
            }
        }
        out
    }
}
}
