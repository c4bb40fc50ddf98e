//! The generic 32-quant kernel on AVX2: 8 rows × `T` tokens per call. Per block and register
//! one broadcast of 4 activation bytes and one `vpmaddubsw` (or the type's exact replacement)
//! for 8 rows; the registers' i16 pair sums are added as far as the type allows before one
//! `vpmaddwd`, and the scale conversion and multiply-add happen once per 8 rows.
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C, activations from the crate's quantizers
//! and `a`/`sides` with at least `w.nb` entries per token.

use std::arch::x86_64::*;

use super::{Q32x8, Q32};
use crate::kernels::activations::Q8Side;
use crate::kernels::packed::avx2::{bcast4, rows_out};
use crate::kernels::packed::GROUP;
use crate::quant::blocks::BlockQ8_0;

/// A [`Q32`] type's AVX2 unpacking.
pub(crate) trait Q32Avx2: Q32 {
    /// What the registers' bytes carry above the quants' values (without mins).
    const OFFSET_AVX2: i32 = Self::OFFSET;
    /// Registers whose products sum exactly in i16 (two products per lane each): 1, 2 or 4.
    const I16_SUM: usize = 4;

    /// The registers' bytes from their codes.
    ///
    /// # Safety
    /// AVX2, FMA and F16C.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn bytes(codes: [__m256i; 8]) -> [__m256i; 8] {
        codes
    }

    /// The i16 pair sums of register bytes `q` times activation bytes `y`.
    ///
    /// # Safety
    /// As for `bytes`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn products(q: __m256i, y: __m256i) -> __m256i {
        _mm256_maddubs_epi16(q, y)
    }
}

/// The 8 registers' codes of block `gb`: a macro, not a function, so it is always inlined
/// into the kernel (returned out of line, its eight registers go through memory: a 6% slower
/// 0.5B tg128 when codegen once put it in another unit than `group`).
macro_rules! codes {
    ($S:ty, $w:expr, $gb:expr) => {{
        let (w, gb) = ($w, $gb);
        let m4 = _mm256_set1_epi8(15);
        let p = w.qs.as_ptr().add(gb * 4) as *const __m256i;
        let lines = each!(4, _mm256_setzero_si256(), |i| _mm256_load_si256(p.add(i)));
        let nibbles = each!(8, _mm256_setzero_si256(), |k| {
            let v = lines[k % 4];
            _mm256_and_si256(if k < 4 { v } else { _mm256_srli_epi16(v, 4) }, m4)
        });
        if !<$S>::FIFTH_BIT {
            nibbles
        } else {
            let h = _mm256_load_si256(w.qh.as_ptr().add(gb) as *const __m256i);
            each!(8, _mm256_setzero_si256(), |k| _mm256_or_si256(
                nibbles[k],
                crate::kernels::packed::kquant::avx2::bit_to(h, k, 4)
            ))
        }
    }};
}

/// Rows of group `g` × `T` tokens: `out[t][r]`.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn group<S: Q32Avx2, const T: usize>(
    w: &Q32x8<S>,
    g: usize,
    a: [&[BlockQ8_0]; T],
    sides: [&[Q8Side]; T],
) -> [[f32; GROUP]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..w.nb {
            let gb = g * w.nb + b;
            w.prefetch_block(gb);
            let q = S::bytes(codes!(S, w, gb));
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(w.d.as_ptr().add(gb) as *const __m128i));
            for t in 0..T {
                let y = a[t].get_unchecked(b);
                let p = |k: usize| S::products(q[k], bcast4(y, k));
                let sum = |k: usize, n: usize| match n {
                    1 => _mm256_madd_epi16(p(k), ones),
                    2 => _mm256_madd_epi16(_mm256_add_epi16(p(k), p(k + 1)), ones),
                    _ => _mm256_madd_epi16(
                        _mm256_add_epi16(
                            _mm256_add_epi16(p(k), p(k + 1)),
                            _mm256_add_epi16(p(k + 2), p(k + 3)),
                        ),
                        ones,
                    ),
                };
                let n = S::I16_SUM;
                let mut sumi = sum(0, n);
                for k in (n..8).step_by(n) {
                    sumi = _mm256_add_epi32(sumi, sum(k, n));
                }
                let side = sides[t].get_unchecked(b);
                let suma = side.offset16 >> 4;
                let dy = _mm256_set1_ps(side.d);
                if S::MIN {
                    let m =
                        _mm256_cvtph_ps(_mm_loadu_si128(w.m.as_ptr().add(gb) as *const __m128i));
                    let a =
                        _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(sumi), acc[t]);
                    acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(side.d * suma as f32), a);
                } else {
                    let sumi = _mm256_sub_epi32(sumi, _mm256_set1_epi32(S::OFFSET_AVX2 * suma));
                    acc[t] =
                        _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(sumi), acc[t]);
                }
            }
        }
        rows_out(&acc)
    }
}
