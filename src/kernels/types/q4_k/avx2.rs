//! Q4_K on AVX2, weights in place (`KOLIBRI_REPACK=0`): the dot per token and `R` rows × `T`
//! tokens tiles (each unpacked block reused for every token; per sub-block the dot's integer
//! sums).
//!
//! # Safety
//! Every `pub unsafe fn` requires AVX2, FMA and F16C and activations from the crate's
//! quantizers. Tile rows should have equal block counts; only the shortest row's is used.

use std::arch::x86_64::*;

use crate::kernels::simd::avx2::{
    f16_to_f32, hsum_ps, k4_min_products, k4_scale_vectors, load256, reduce,
};
use crate::kernels::types::{common_len, tiles, Dense};
use crate::quant::blocks::{BlockQ4K, BlockQ8K};
use crate::quant::dequant_k::unpack_k4_scales;

pub(super) const DENSE: Dense<BlockQ4K, BlockQ8K> = Dense {
    dot,
    dot_isa: "avx2",
    tiles: tiles!(Rows1, tile),
    tiles_isa: "avx2",
};

/// Q4_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let m4 = _mm256_set1_epi8(0x0f);
        let mut acc = _mm256_setzero_ps();
        let mut accm = _mm256_setzero_ps();
        for i in 0..n {
            let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
            let (sc, m) = unpack_k4_scales(&x.scales);
            let mins = k4_min_products(m, &y.bsums);
            accm = _mm256_fmadd_ps(
                _mm256_set1_ps(f16_to_f32(x.dmin) * y.d),
                _mm256_cvtepi32_ps(mins),
                accm,
            );
            let scv = k4_scale_vectors(sc);
            let mut sumi = _mm256_setzero_si256();
            for j in 0..4 {
                let q = load256(x.qs.as_ptr().add(32 * j));
                let lo = _mm256_and_si256(q, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                let plo = _mm256_maddubs_epi16(lo, load256(y.qs.as_ptr().add(64 * j) as _));
                let phi = _mm256_maddubs_epi16(hi, load256(y.qs.as_ptr().add(64 * j + 32) as _));
                let plo = _mm256_madd_epi16(plo, scv[2 * j]);
                let phi = _mm256_madd_epi16(phi, scv[2 * j + 1]);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
            }
            let d = _mm256_set1_ps(f16_to_f32(x.d) * y.d);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(_mm256_sub_ps(acc, accm))
    }
}

/// Q4_K weights × Q8_K activations, `R` rows × `T` tokens.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile<const R: usize, const T: usize>(
    w: [&[BlockQ4K]; R],
    a: [&[BlockQ8K]; T],
) -> [[f32; T]; R] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = common_len(&w, &a);
        let m4 = _mm256_set1_epi8(0x0f);
        let mut acc = [[_mm256_setzero_ps(); T]; R];
        for i in 0..n {
            for r in 0..R {
                let x = w[r].get_unchecked(i);
                let (sc, m) = unpack_k4_scales(&x.scales);
                let scv = k4_scale_vectors(sc);
                // Each min covers two 16-element bsums groups.
                let m8 = _mm_cvtsi64_si128(u64::from_le_bytes(m) as i64);
                let m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
                let mut sumi = [_mm256_setzero_si256(); T];
                for j in 0..4 {
                    let q = load256(x.qs.as_ptr().add(32 * j));
                    let lo = _mm256_and_si256(q, m4);
                    let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                    for t in 0..T {
                        let yq = a[t].get_unchecked(i).qs.as_ptr().add(64 * j) as *const u8;
                        let plo = _mm256_maddubs_epi16(lo, load256(yq));
                        let phi = _mm256_maddubs_epi16(hi, load256(yq.add(32)));
                        let plo = _mm256_madd_epi16(plo, scv[2 * j]);
                        let phi = _mm256_madd_epi16(phi, scv[2 * j + 1]);
                        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(plo, phi));
                    }
                }
                let (d, dmin) = (f16_to_f32(x.d), f16_to_f32(x.dmin));
                for t in 0..T {
                    let y = a[t].get_unchecked(i);
                    let mins = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), m16);
                    let s = _mm256_fmadd_ps(
                        _mm256_set1_ps(d * y.d),
                        _mm256_cvtepi32_ps(sumi[t]),
                        acc[r][t],
                    );
                    acc[r][t] =
                        _mm256_fnmadd_ps(_mm256_set1_ps(dmin * y.d), _mm256_cvtepi32_ps(mins), s);
                }
            }
        }
        reduce(&acc)
    }
}
