//! AVX2 dot and tile kernels of the Q8_0-activation types. The products use the sign trick
//! (|w| · sign(a, w) through `vpmaddubsw`), exact for |w| <= 128 and |a| <= 127.
//!
//! # Safety
//! Every `pub unsafe fn` here requires AVX2, FMA and F16C and activations from the crate's
//! quantizers (quants in -127..=127). Rows should have equal block counts; only the shortest
//! row's count is used.

use std::arch::x86_64::*;

use half::f16;

use crate::kernels::simd::avx2::{d_product, dot_i8, f16_to_f32, hsum_ps, load256, reduce};
use crate::kernels::types::common_len;
use crate::quant::blocks::BlockQ8_0;

/// A 32-quant weight block as 32 signed bytes and its scale.
pub trait Signed32: Copy {
    /// # Safety
    /// AVX2, FMA and F16C.
    unsafe fn signed(&self) -> __m256i;
    fn scale(&self) -> f16;
}

/// `w · a`, four blocks per iteration into independent f32 accumulators, one horizontal sum
/// per call.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot<B: Signed32>(w: &[B], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 4 <= n {
            for (k, s) in acc.iter_mut().enumerate() {
                let (x, y) = (w.get_unchecked(i + k), a.get_unchecked(i + k));
                let p = dot_i8(x.signed(), load256(y.qs.as_ptr() as _));
                *s = _mm256_fmadd_ps(d_product(x.scale(), y.d), _mm256_cvtepi32_ps(p), *s);
            }
            i += 4;
        }
        for j in i..n {
            let (x, y) = (w.get_unchecked(j), a.get_unchecked(j));
            let p = dot_i8(x.signed(), load256(y.qs.as_ptr() as _));
            acc[j - i] =
                _mm256_fmadd_ps(d_product(x.scale(), y.d), _mm256_cvtepi32_ps(p), acc[j - i]);
        }
        hsum_ps(_mm256_add_ps(
            _mm256_add_ps(acc[0], acc[1]),
            _mm256_add_ps(acc[2], acc[3]),
        ))
    }
}

/// `R` rows × `T` tokens (at most 8): each unpacked weight block is reused for every token
/// and each activation block for every row; the integer sums per block are the dot kernel's.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile<B: Signed32, const R: usize, const T: usize>(
    w: [&[B]; R],
    a: [&[BlockQ8_0]; T],
) -> [[f32; T]; R] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = common_len(&w, &a);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_ps(); T]; R];
        // The activation scales of a block column go through one conversion (T <= 8).
        const { assert!(T <= 8) };
        for i in 0..n {
            let mut bits = [0u64; 2];
            for t in 0..T {
                bits[t / 4] |= (a[t].get_unchecked(i).d.to_bits() as u64) << (16 * (t % 4));
            }
            let dy = _mm256_cvtph_ps(_mm_set_epi64x(bits[1] as i64, bits[0] as i64));
            for r in 0..R {
                let x = w[r].get_unchecked(i);
                let q = x.signed();
                let d = _mm256_mul_ps(_mm256_set1_ps(f16_to_f32(x.scale())), dy);
                let aq = _mm256_sign_epi8(q, q);
                for t in 0..T {
                    let y = load256(a[t].get_unchecked(i).qs.as_ptr() as _);
                    let p = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(y, q));
                    let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                    let dt = _mm256_permutevar8x32_ps(d, _mm256_set1_epi32(t as i32));
                    acc[r][t] = _mm256_fmadd_ps(dt, p, acc[r][t]);
                }
            }
        }
        reduce(&acc)
    }
}
