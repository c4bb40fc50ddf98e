//! Q6_K on AVX2, weights in place (`KOLIBRI_REPACK=0`): the dot per token and `R` rows × `T`
//! tokens tiles (per 16-quant sub-block the dot's integer sums).
//!
//! # Safety
//! Every `pub unsafe fn` requires AVX2, FMA and F16C and activations from the crate's
//! quantizers. Tile rows should have equal block counts; only the shortest row's is used.

use std::arch::x86_64::*;

use crate::kernels::simd::avx2::{f16_to_f32, hsum_ps, load128, load256, reduce};
use crate::kernels::types::{common_len, tiles, Dense};
use crate::quant::blocks::{BlockQ6K, BlockQ8K};

pub(super) const DENSE: Dense<BlockQ6K, BlockQ8K> = Dense {
    dot,
    dot_isa: "avx2",
    tiles: tiles!(Rows1, tile),
    tiles_isa: "avx2",
};

/// Half `h` (0 or 1) of a Q6_K block as four vectors of 32 unsigned 6-bit quants (0..64),
/// in activation order: elements 128h + 32k .. 128h + 32k + 32 for k = 0..4.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_half(x: &BlockQ6K, h: usize) -> [__m256i; 4] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0f);
        let m30 = _mm256_set1_epi8(0x30);
        let ql0 = load256(x.ql.as_ptr().add(64 * h));
        let ql1 = load256(x.ql.as_ptr().add(64 * h + 32));
        let qh = load256(x.qh.as_ptr().add(32 * h));
        [
            _mm256_or_si256(
                _mm256_and_si256(ql0, m4),
                _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30),
            ),
            _mm256_or_si256(
                _mm256_and_si256(ql1, m4),
                _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                _mm256_and_si256(qh, m30),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30),
            ),
        ]
    }
}

/// Q6_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        // Per 128-bit lane, broadcast i16 element 0 (low lane) or 1 (high lane) of a dword.
        let pick = _mm256_setr_epi8(
            0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, //
            2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
        );
        let mut acc = _mm256_setzero_ps();
        for i in 0..n {
            let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
            let sc16 = _mm256_cvtepi8_epi16(load128(x.scales.as_ptr() as _));
            // q - 32 is applied afterwards as -32 * sum(scale * bsum).
            let corr = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), sc16);
            let mut sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
            for h in 0..2 {
                let q = unpack_half(x, h);
                for (k, &qk) in q.iter().enumerate() {
                    let p =
                        _mm256_maddubs_epi16(qk, load256(y.qs.as_ptr().add(128 * h + 32 * k) as _));
                    // Scales of groups 8h+2k (low lane) and 8h+2k+1 (high lane).
                    let pair =
                        _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32((4 * h + k) as i32));
                    let s = _mm256_shuffle_epi8(pair, pick);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
                }
            }
            let d = _mm256_set1_ps(f16_to_f32(x.d) * y.d);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(acc)
    }
}

/// Q6_K weights × Q8_K activations, `R` rows × `T` tokens.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile<const R: usize, const T: usize>(
    w: [&[BlockQ6K]; R],
    a: [&[BlockQ8K]; T],
) -> [[f32; T]; R] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = common_len(&w, &a);
        // Per 128-bit lane, broadcast i16 element 0 (low lane) or 1 (high lane) of a dword.
        let pick = _mm256_setr_epi8(
            0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, //
            2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
        );
        let mut acc = [[_mm256_setzero_ps(); T]; R];
        for i in 0..n {
            for r in 0..R {
                let x = w[r].get_unchecked(i);
                let sc16 = _mm256_cvtepi8_epi16(load128(x.scales.as_ptr() as _));
                let mut sumi = [_mm256_setzero_si256(); T];
                for t in 0..T {
                    // q - 32 is applied as -32 * sum(scale * bsum).
                    let y = a[t].get_unchecked(i);
                    let corr = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), sc16);
                    sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
                }
                for h in 0..2 {
                    let q = unpack_half(x, h);
                    for (k, &qk) in q.iter().enumerate() {
                        // Scales of groups 8h+2k (low lane) and 8h+2k+1 (high lane).
                        let pair = _mm256_permutevar8x32_epi32(
                            sc16,
                            _mm256_set1_epi32((4 * h + k) as i32),
                        );
                        let s = _mm256_shuffle_epi8(pair, pick);
                        for t in 0..T {
                            let yq = a[t].get_unchecked(i).qs.as_ptr().add(128 * h + 32 * k);
                            let p = _mm256_maddubs_epi16(qk, load256(yq as _));
                            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, s));
                        }
                    }
                }
                let d = f16_to_f32(x.d);
                for t in 0..T {
                    let dd = _mm256_set1_ps(d * a[t].get_unchecked(i).d);
                    acc[r][t] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sumi[t]), acc[r][t]);
                }
            }
        }
        reduce(&acc)
    }
}
