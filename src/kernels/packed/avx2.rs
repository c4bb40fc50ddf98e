//! AVX2 helpers of the one-group kernels over the 8-row layouts.
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C.

use std::arch::x86_64::*;

use half::f16;

use super::GROUP;
use crate::quant::blocks::{BlockQ8K, BlockQ8_0};

/// Activation bytes `4k..4k+4` of a block, in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn bcast4(y: &BlockQ8_0, k: usize) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm256_set1_epi32((y.qs.as_ptr().add(4 * k) as *const i32).read_unaligned()) }
}

/// Each token's 8 row sums out of its accumulator.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_out<const T: usize>(acc: &[__m256; T]) -> [[f32; GROUP]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut out = [[0f32; GROUP]; T];
        for t in 0..T {
            _mm256_storeu_ps(out[t].as_mut_ptr(), acc[t]);
        }
        out
    }
}

/// Activation bytes `4k..4k+4` of a Q8_K block, in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn bcast4_k(y: &BlockQ8K, k: usize) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm256_set1_epi32((y.qs.as_ptr().add(4 * k) as *const i32).read_unaligned()) }
}

/// Activation 16-quant sums `2c` and `2c + 1` as an i16 pair in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn bsum_pair(y: &BlockQ8K, c: usize) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm256_set1_epi32((y.bsums.as_ptr().add(2 * c) as *const i32).read_unaligned()) }
}

/// Per-row bytes `[a0..a8]` and `[b0..b8]` as i16 pairs `(a_r, b_r)` for `vpmaddwd`: row `r`
/// owns lanes `2r` and `2r + 1`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn pairs_u8(a: &[u8; GROUP], b: &[u8; GROUP]) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let (a, b) = (
            _mm_loadl_epi64(a.as_ptr() as *const __m128i),
            _mm_loadl_epi64(b.as_ptr() as *const __m128i),
        );
        _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b))
    }
}

/// [`pairs_u8`] for signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn pairs_i8(a: &[i8; GROUP], b: &[i8; GROUP]) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let (a, b) = (
            _mm_loadl_epi64(a.as_ptr() as *const __m128i),
            _mm_loadl_epi64(b.as_ptr() as *const __m128i),
        );
        _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b))
    }
}

/// The 8 rows' f16 values as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_f32(v: &[f16; GROUP]) -> __m256 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr() as *const __m128i)) }
}
