//! The float types on AVX2 + F16C: dot kernels in four f32 chains, and `R` rows × `T` tokens
//! tiles that widen each 8-element slice of a row once for all tokens and each token's once
//! for all rows. The products are exact widenings and one FMA each; only the order of the f32
//! sums differs from the scalar twin's f64 sums, so results match within f32 rounding.
//!
//! # Safety
//! Every `pub unsafe fn` requires AVX2, FMA and F16C. Tile rows should have equal lengths;
//! only the shortest row's length is used.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::Widen;
use crate::kernels::simd::avx2::{hsum_ps, load128, reduce};
use crate::kernels::types::{common_len, tiles, Dense};

/// The AVX2 kernels of float element `E`.
pub(super) struct Kernels<E: 'static>(std::marker::PhantomData<E>);

impl<E: Lanes8> Kernels<E> {
    pub(super) const DENSE: Dense<E, E> = Dense {
        dot: dot::<E>,
        dot_isa: "avx2",
        tiles: tiles!(Rows1, float_tile, E),
        tiles_isa: "avx2",
    };
}

/// `w · a`: 32 products per step in four f32 FMA chains, then 8 at a time, then the tail.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot<E: Lanes8>(w: &[E], a: &[E]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let (pw, pa) = (w.as_ptr(), a.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (k, s) in acc.iter_mut().enumerate() {
                let o = i + 8 * k;
                *s = _mm256_fmadd_ps(E::load8(pw.add(o)), E::load8(pa.add(o)), *s);
            }
            i += 32;
        }
        while i + 8 <= n {
            acc[0] = _mm256_fmadd_ps(E::load8(pw.add(i)), E::load8(pa.add(i)), acc[0]);
            i += 8;
        }
        let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut sum = hsum_ps(s);
        for j in i..n {
            sum += w[j].widen() * a[j].widen();
        }
        sum
    }
}

/// 8 bf16 values widened to f32 (each the top half of its f32).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16x8(p: *const u8) -> __m256 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16)) }
}

/// 8 values of a float weight type, widened to f32 exactly.
pub trait Lanes8: Widen {
    /// # Safety
    /// AVX2, FMA and F16C; 8 values readable at `p`.
    unsafe fn load8(p: *const Self) -> __m256;
}

impl Lanes8 for f32 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(p: *const f32) -> __m256 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm256_loadu_ps(p) }
    }
}

impl Lanes8 for f16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(p: *const f16) -> __m256 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm256_cvtph_ps(load128(p as *const u8)) }
    }
}

impl Lanes8 for bf16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(p: *const bf16) -> __m256 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { bf16x8(p as *const u8) }
    }
}

/// `R` rows × `T` tokens of a float type `E` (f32, f16, bf16): each 8-element slice of a row
/// widened once for all tokens and each token's once for all rows (the dot kernels widen both
/// per pair); the products are the dot kernels', the order of the f32 sums differs. The last
/// `n % 8` elements go through a scalar loop, as in those kernels.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn float_tile<E: Lanes8, const R: usize, const T: usize>(
    w: [&[E]; R],
    a: [&[E]; T],
) -> [[f32; T]; R] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = common_len(&w, &a);
        let mut acc = [[_mm256_setzero_ps(); T]; R];
        let mut i = 0;
        while i + 8 <= n {
            let x: [__m256; R] = std::array::from_fn(|r| E::load8(w[r].as_ptr().add(i)));
            for t in 0..T {
                let y = E::load8(a[t].as_ptr().add(i));
                for r in 0..R {
                    acc[r][t] = _mm256_fmadd_ps(x[r], y, acc[r][t]);
                }
            }
            i += 8;
        }
        let mut out = reduce(&acc);
        for r in 0..R {
            for t in 0..T {
                for j in i..n {
                    out[r][t] += w[r][j].widen() * a[t][j].widen();
                }
            }
        }
        out
    }
}
