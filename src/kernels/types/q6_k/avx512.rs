//! Q6_K on AVX-512 VNNI, weights in place (`KOLIBRI_REPACK=0`): two `vpdpbusd` per 128 quants
//! for the dot, the AVX2 tiles for batches.
//!
//! # Safety
//! Every `pub unsafe fn` requires the AVX-512 path's features and activations from the
//! crate's quantizers.

use std::arch::x86_64::*;

use crate::kernels::simd::avx2::f16_to_f32;
use crate::kernels::simd::avx512::{load256, load512, tf};
use crate::kernels::types::{tiles, Dense};
use crate::quant::blocks::{BlockQ6K, BlockQ8K};

pub(super) const DENSE: Dense<BlockQ6K, BlockQ8K> = Dense {
    dot,
    dot_isa: "avx512",
    tiles: tiles!(Rows1, super::avx2::tile),
    tiles_isa: "avx2",
};

tf! {
/// Q6_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let m4 = _mm512_set1_epi8(0x0f);
        let m30 = _mm512_set1_epi8(0x30);
        let zero = _mm512_setzero_si512();
        // 16-bit shifts that bring qh bit pairs (0,1 | 2,3) and (4,5 | 6,7) to bits 4,5 of each
        // byte, for the first | second 32 elements of a vector.
        let sh_a = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
        let sh_b = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
        let mut acc = _mm512_setzero_ps();
        for i in 0..n {
            let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
            let sc8 = _mm_loadu_si128(x.scales.as_ptr() as *const __m128i);
            let scv = _mm512_cvtepi8_epi32(sc8);
            // q - 32 is applied as -32 * sum(scale * bsum).
            let corr = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), _mm256_cvtepi8_epi16(sc8));
            let mut sumi = _mm512_sub_epi32(zero, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
            for h in 0..2 {
                let ql = load512(x.ql.as_ptr().add(64 * h));
                let qh = _mm512_broadcast_i64x4(load256(x.qh.as_ptr().add(32 * h)));
                let q12 = _mm512_or_si512(
                    _mm512_and_si512(ql, m4),
                    _mm512_and_si512(_mm512_sllv_epi16(qh, sh_a), m30),
                );
                let q34 = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                    _mm512_and_si512(_mm512_srlv_epi16(qh, sh_b), m30),
                );
                let d12 = _mm512_dpbusd_epi32(zero, q12, load512(y.qs.as_ptr().add(128 * h) as _));
                let d34 =
                    _mm512_dpbusd_epi32(zero, q34, load512(y.qs.as_ptr().add(128 * h + 64) as _));
                // Four lanes per 16-element group; groups 8h..8h+4 and 8h+4..8h+8.
                let g = (8 * h) as i32;
                let i12 = _mm512_add_epi32(_mm512_set1_epi32(g), group_index());
                let i34 = _mm512_add_epi32(_mm512_set1_epi32(g + 4), group_index());
                sumi = _mm512_add_epi32(
                    sumi,
                    _mm512_mullo_epi32(d12, _mm512_permutexvar_epi32(i12, scv)),
                );
                sumi = _mm512_add_epi32(
                    sumi,
                    _mm512_mullo_epi32(d34, _mm512_permutexvar_epi32(i34, scv)),
                );
            }
            let d = f16_to_f32(x.d) * y.d;
            acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        }
        _mm512_reduce_add_ps(acc)
    }
}

#[inline]
unsafe fn group_index() -> __m512i {
    _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
}
}
