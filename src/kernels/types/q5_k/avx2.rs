//! Q5_K on AVX2: the dot per token.
//!
//! # Safety
//! Every `pub unsafe fn` requires AVX2, FMA and F16C and activations from the crate's
//! quantizers.

use std::arch::x86_64::*;

use crate::kernels::simd::avx2::{f16_to_f32, hsum_ps, k4_min_products, k4_scale_vectors, load256};
use crate::kernels::types::{Dense, TileSet};
use crate::quant::blocks::{BlockQ5K, BlockQ8K};
use crate::quant::dequant_k::unpack_k4_scales;

pub(super) const DENSE: Dense<BlockQ5K, BlockQ8K> = Dense {
    dot,
    dot_isa: "avx2",
    tiles: TileSet::None,
    tiles_isa: "",
};

/// Q5_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let m4 = _mm256_set1_epi8(0x0f);
        let b16 = _mm256_set1_epi8(16);
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
            let qh = load256(x.qh.as_ptr());
            let mut sumi = _mm256_setzero_si256();
            for j in 0..4 {
                let q = load256(x.qs.as_ptr().add(32 * j));
                // Bit 2j of qh is the 5th bit of the low nibbles, bit 2j+1 of the high ones.
                let bl = _mm256_set1_epi8((1u8 << (2 * j)) as i8);
                let bh = _mm256_set1_epi8((1u8 << (2 * j + 1)) as i8);
                let hl = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b16);
                let hh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b16);
                let lo = _mm256_or_si256(_mm256_and_si256(q, m4), hl);
                let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh);
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
