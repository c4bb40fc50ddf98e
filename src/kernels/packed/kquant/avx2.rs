//! The generic K-quant kernel on AVX2: one group (8 rows) × `T` tokens per call. Per register
//! one `vpmaddubsw` (or the type's exact replacement) for 8 rows; a 16-quant chunk's products
//! are summed in i16 as far as the type allows, then one `vpmaddwd` applies the chunk's scale.
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C, activations from the crate's quantizers
//! and `a`/`sides` with at least `w.nb` entries per token.

use std::arch::x86_64::*;

use super::{subs, KQuant};
use crate::kernels::activations::Q8KSide;
use crate::kernels::packed::avx2::{bcast4_k, bsum_pair, rows_f32, rows_out};
use crate::kernels::packed::{Grouped, Line32, GROUP};
use crate::quant::blocks::BlockQ8K;

/// A [`KQuant`] block's AVX2 unpacking.
pub(crate) trait KQuantAvx2: KQuant {
    /// What the registers' bytes carry above the quants' values (the scalar twin's offset
    /// unless [`KQuantAvx2::products`] reads them signed).
    const OFFSET_AVX2: i32 = Self::OFFSET;
    /// Registers whose products sum exactly in i16 (two products per lane each): 1, 2 or 4.
    const I16_SUM: usize = 4;

    /// Registers `8j..8j + 8` (sub-block `j` of 32 quants) as bytes.
    ///
    /// # Safety
    /// AVX2, FMA and F16C.
    unsafe fn registers(x: &Self, j: usize) -> [__m256i; 8];

    /// The i16 pair sums of register bytes `q` times activation bytes `y`.
    ///
    /// # Safety
    /// As for `registers`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn products(q: __m256i, y: __m256i) -> __m256i {
        _mm256_maddubs_epi16(q, y)
    }

    /// Per row `r` the i16 pair `(sc_r, sc_r)` of sub-block `s`'s scale, for `vpmaddwd`.
    ///
    /// # Safety
    /// As for `registers`.
    unsafe fn scale_pairs(x: &Self, s: usize) -> __m256i;

    /// Per row `r` the i16 pair `(coef_{2i}, coef_{2i+1})` of the mins (or scales) of
    /// sub-blocks `2i` and `2i + 1`.
    ///
    /// # Safety
    /// As for `registers`.
    unsafe fn coef_pairs(x: &Self, i: usize) -> __m256i;
}

/// The 8 registers of a sub-block stored as nibble lines: register `m` the low nibbles of
/// line `m % 4` (`m < 4`), register `m` the high ones (`m >= 4`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn nibble_registers(lines: &[Line32]) -> [__m256i; 8] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm256_set1_epi8(15);
        each!(8, _mm256_setzero_si256(), |m| {
            let v = _mm256_load_si256(lines[m % 4].0.as_ptr() as *const __m256i);
            let v = if m < 4 { v } else { _mm256_srli_epi16(v, 4) };
            _mm256_and_si256(v, m4)
        })
    }
}

/// The 8 registers of a sub-block stored as 2-bit fields: register `m` at bits `2 (m % 4)`
/// of line `m / 4`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn crumb_registers(lines: &[Line32]) -> [__m256i; 8] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m2 = _mm256_set1_epi8(3);
        let l = [0, 1].map(|i| _mm256_load_si256(lines[i].0.as_ptr() as *const __m256i));
        each!(8, _mm256_setzero_si256(), |m| {
            let v = l[m / 4];
            let v = match m % 4 {
                0 => v,
                1 => _mm256_srli_epi16(v, 2),
                2 => _mm256_srli_epi16(v, 4),
                _ => _mm256_srli_epi16(v, 6),
            };
            _mm256_and_si256(v, m2)
        })
    }
}

/// Bit `m` of each byte of `h` at bit `to` (16-bit shifts; the mask keeps in-byte bits).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn bit_to(h: __m256i, m: usize, to: usize) -> __m256i {
    let v = match to as i32 - m as i32 {
        4 => _mm256_slli_epi16(h, 4),
        3 => _mm256_slli_epi16(h, 3),
        2 => _mm256_slli_epi16(h, 2),
        1 => _mm256_slli_epi16(h, 1),
        0 => h,
        -1 => _mm256_srli_epi16(h, 1),
        -2 => _mm256_srli_epi16(h, 2),
        -3 => _mm256_srli_epi16(h, 3),
        -4 => _mm256_srli_epi16(h, 4),
        -5 => _mm256_srli_epi16(h, 5),
        _ => _mm256_srli_epi16(h, 6),
    };
    _mm256_and_si256(v, _mm256_set1_epi8(1 << to))
}

/// `S` x8 rows of group `g` × `T` tokens: `out[t][r]`.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn group<S: KQuantAvx2, const T: usize>(
    w: &Grouped<S>,
    g: usize,
    a: [&[BlockQ8K]; T],
    sides: [&[Q8KSide]; T],
) -> [[f32; GROUP]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..w.nb {
            w.prefetch_block(g, b);
            let x = w.block(g, b);
            let y = each!(T, a[0].get_unchecked(b), |t| a[t].get_unchecked(b));
            let mut isum = [_mm256_setzero_si256(); T];
            for j in 0..8 {
                let q = S::registers(x, j);
                for c in 0..2 {
                    // Chunk 2j + c: registers 8j + 4c..8j + 4c + 4.
                    let sc = S::scale_pairs(x, (2 * j + c) * 16 / S::SUB);
                    for t in 0..T {
                        let p =
                            |k: usize| S::products(q[4 * c + k], bcast4_k(y[t], 8 * j + 4 * c + k));
                        let s = match S::I16_SUM {
                            4 => _mm256_madd_epi16(
                                _mm256_add_epi16(
                                    _mm256_add_epi16(p(0), p(1)),
                                    _mm256_add_epi16(p(2), p(3)),
                                ),
                                sc,
                            ),
                            2 => _mm256_add_epi32(
                                _mm256_madd_epi16(_mm256_add_epi16(p(0), p(1)), sc),
                                _mm256_madd_epi16(_mm256_add_epi16(p(2), p(3)), sc),
                            ),
                            _ => _mm256_add_epi32(
                                _mm256_add_epi32(
                                    _mm256_madd_epi16(p(0), sc),
                                    _mm256_madd_epi16(p(1), sc),
                                ),
                                _mm256_add_epi32(
                                    _mm256_madd_epi16(p(2), sc),
                                    _mm256_madd_epi16(p(3), sc),
                                ),
                            ),
                        };
                        isum[t] = _mm256_add_epi32(isum[t], s);
                    }
                }
            }
            let (d, dmin) = (rows_f32(x.d()), rows_f32(x.dmin()));
            for t in 0..T {
                let corr = corrections(x, y[t], sides[t].get_unchecked(b));
                let dy = _mm256_set1_ps(y[t].d);
                acc[t] = finish::<S>(d, dmin, dy, isum[t], corr, acc[t]);
            }
        }
        rows_out(&acc)
    }
}

/// Per row `Σ_s coef_s · A_s` of one token block: its sub-block sums in i16 pairs (the block
/// sums, or for 32-quant sub-blocks the side's pairs), one `vpmaddwd` per pair.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn corrections<S: KQuantAvx2>(x: &S, y: &BlockQ8K, side: &Q8KSide) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut corr = _mm256_setzero_si256();
        for i in 0..subs::<S>() / 2 {
            let sums = if S::SUB == 16 {
                bsum_pair(y, i)
            } else {
                _mm256_set1_epi32(side.min_pairs[i])
            };
            corr = _mm256_add_epi32(corr, _mm256_madd_epi16(S::coef_pairs(x, i), sums));
        }
        corr
    }
}

/// One block's f32 step for 8 rows and one token (the module docs of [`super`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn finish<S: KQuantAvx2>(
    d: __m256,
    dmin: __m256,
    dy: __m256,
    isum: __m256i,
    corr: __m256i,
    acc: __m256,
) -> __m256 {
    if S::MINS {
        let acc = _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(isum), acc);
        _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dy), _mm256_cvtepi32_ps(corr), acc)
    } else {
        let off = _mm256_mullo_epi32(corr, _mm256_set1_epi32(S::OFFSET_AVX2));
        let isum = _mm256_sub_epi32(isum, off);
        _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(isum), acc)
    }
}
