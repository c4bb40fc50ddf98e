//! Q5_K on AVX-512 VNNI: the dot per token (the fifth bits merged by a masked move).
//!
//! # Safety
//! Every `pub unsafe fn` requires the AVX-512 path's features and activations from the
//! crate's quantizers.

use std::arch::x86_64::*;

use crate::kernels::simd::avx2::f16_to_f32;
use crate::kernels::simd::avx512::{hsum256, k4_prologue, load256, load512, pair_index, tf};
use crate::kernels::types::{Dense, TileSet};
use crate::quant::blocks::{BlockQ5K, BlockQ8K};

pub(super) const DENSE: Dense<BlockQ5K, BlockQ8K> = Dense {
    dot,
    dot_isa: "avx512",
    tiles: TileSet::None,
    tiles_isa: "",
};

tf! {
/// Q5_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let m4 = _mm256_set1_epi8(0x0f);
        let b16 = _mm512_set1_epi8(16);
        let zero = _mm512_setzero_si512();
        let mut acc = _mm512_setzero_ps();
        let mut accm = _mm256_setzero_ps();
        for i in 0..n {
            let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
            let (scv, mins) = k4_prologue(&x.scales, &y.bsums);
            let dmin = f16_to_f32(x.dmin) * y.d;
            accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), accm);
            let qh = _mm512_broadcast_i64x4(load256(x.qh.as_ptr()));
            let mut sumi = zero;
            for j in 0..4 {
                let q = load256(x.qs.as_ptr().add(32 * j));
                let lo = _mm256_and_si256(q, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                let z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                // 5th bits: qh bit 2j for the low nibbles, bit 2j+1 for the high ones.
                let bits = _mm512_inserti64x4(
                    _mm512_set1_epi8((1u8 << (2 * j)) as i8),
                    _mm256_set1_epi8((1u8 << (2 * j + 1)) as i8),
                    1,
                );
                let hm = _mm512_test_epi8_mask(qh, bits);
                let z = _mm512_or_si512(z, _mm512_maskz_mov_epi8(hm, b16));
                let dot = _mm512_dpbusd_epi32(zero, z, load512(y.qs.as_ptr().add(64 * j) as _));
                let s = _mm512_permutexvar_epi32(pair_index(j as i32), scv);
                sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dot, s));
            }
            let d = f16_to_f32(x.d) * y.d;
            acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        }
        _mm512_reduce_add_ps(acc) - hsum256(accm)
    }
}
}
