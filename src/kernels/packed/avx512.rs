//! AVX-512 helpers of the two-group kernels over the 8-row layouts: a 512-bit register holds
//! the same 4-quant column of both groups (lanes 0..8: group `g`, 8..16: group `g + 1`), so
//! one `vpdpbusd` with the 4 activation bytes broadcast from memory does 64 multiply-adds.
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features.

use std::arch::x86_64::*;

use half::f16;

use super::{Line32, GROUP, PAIR};
use crate::kernels::simd::avx512::{load2x256, tf};

tf! {
/// The same line of both groups.
#[inline]
pub unsafe fn lines(a: &Line32, b: &Line32) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        load2x256(a.0.as_ptr(), b.0.as_ptr())
    }
}

/// 4 bytes at `p`, in every 32-bit lane (an embedded broadcast of `vpdpbusd`'s operand).
#[inline]
pub unsafe fn bcast4(p: *const i8) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        _mm512_set1_epi32((p as *const i32).read_unaligned())
    }
}

/// Both groups' row scales as 16 f32.
#[inline]
pub unsafe fn rows_f32(a: &[f16; GROUP], b: &[f16; GROUP]) -> __m512 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let h = _mm256_set_m128i(
            _mm_loadu_si128(b.as_ptr() as *const __m128i),
            _mm_loadu_si128(a.as_ptr() as *const __m128i),
        );
        _mm512_cvtph_ps(h)
    }
}

/// Both groups' 8 bytes, one per 32-bit lane (`u8` zero-extended).
#[inline]
pub unsafe fn rows_u8(a: &[u8; GROUP], b: &[u8; GROUP]) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        _mm512_cvtepu8_epi32(_mm_set_epi64x(
            (b.as_ptr() as *const i64).read_unaligned(),
            (a.as_ptr() as *const i64).read_unaligned(),
        ))
    }
}

/// [`rows_u8`] for signed bytes.
#[inline]
pub unsafe fn rows_i8(a: &[i8; GROUP], b: &[i8; GROUP]) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        _mm512_cvtepi8_epi32(_mm_set_epi64x(
            (b.as_ptr() as *const i64).read_unaligned(),
            (a.as_ptr() as *const i64).read_unaligned(),
        ))
    }
}

/// Per 32-bit lane `r` of 16 rows the i16 pair `(x[r], y[r])` for `vpmaddwd`, from each
/// group's bytes, read as `i8` when `signed`, else `u8`.
#[inline]
pub unsafe fn row_pairs(
    x: (&[u8; GROUP], &[u8; GROUP]),
    y: (&[u8; GROUP], &[u8; GROUP]),
    signed: bool,
) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let ld = |v: &[u8; GROUP]| (v.as_ptr() as *const i64).read_unaligned();
        let xs = _mm_set_epi64x(ld(x.1), ld(x.0));
        let ys = _mm_set_epi64x(ld(y.1), ld(y.0));
        let lo = _mm_unpacklo_epi8(xs, ys);
        let hi = _mm_unpackhi_epi8(xs, ys);
        let both = _mm256_set_m128i(hi, lo);
        if signed {
            _mm512_cvtepi8_epi16(both)
        } else {
            _mm512_cvtepu8_epi16(both)
        }
    }
}

/// Each token's 16 row sums out of its accumulator.
#[inline]
pub unsafe fn rows_out<const T: usize>(acc: &[__m512; T]) -> [[f32; PAIR]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut out = [[0f32; PAIR]; T];
        for t in 0..T {
            _mm512_storeu_ps(out[t].as_mut_ptr(), acc[t]);
        }
        out
    }
}
}
