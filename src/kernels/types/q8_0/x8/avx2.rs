//! Q8_0 x8 on AVX2: 8 rows × `T` tokens per call, the signed quants through the sign trick
//! (|w| · sign(a, w), exact for every i8 weight).
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C, activations from the crate's quantizers
//! and `a`/`sides` with at least `w.nb` entries per token.

use std::arch::x86_64::*;

use super::Q8_0x8;
use crate::kernels::activations::Q8Side;
use crate::kernels::packed::avx2::{bcast4, rows_out};
use crate::kernels::packed::{width_table, PackedKernels, GROUP};
use crate::quant::blocks::BlockQ8_0;

pub(super) const KERNELS: PackedKernels<Q8_0x8> = PackedKernels {
    group: Some(width_table!(Q8_0x8, GROUP, q8_0x8_group, first_sides)),
    group_isa: "avx2",
    ..PackedKernels::scalar(8)
};

/// Q8_0x8 rows of group `g` × `T` tokens: `out[t][r]`. Each product is |w| · sign(a, w)
/// (`vpmaddubsw` needs one unsigned side); pair sums reach 2 · 128 · 127, so every register
/// goes through `vpmaddwd` on its own.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q8_0x8_group<const T: usize>(
    w: &Q8_0x8,
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
            let p = w.qs.as_ptr().add(gb * 8) as *const __m256i;
            let q = each!(8, _mm256_setzero_si256(), |k| _mm256_load_si256(p.add(k)));
            let aq = each!(8, _mm256_setzero_si256(), |k| _mm256_abs_epi8(q[k]));
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(w.d.as_ptr().add(gb) as *const __m128i));
            for t in 0..T {
                let y = a[t].get_unchecked(b);
                let p = |k: usize| {
                    let s = _mm256_sign_epi8(bcast4(y, k), q[k]);
                    _mm256_madd_epi16(_mm256_maddubs_epi16(aq[k], s), ones)
                };
                let sumi = _mm256_add_epi32(
                    _mm256_add_epi32(_mm256_add_epi32(p(0), p(1)), _mm256_add_epi32(p(2), p(3))),
                    _mm256_add_epi32(_mm256_add_epi32(p(4), p(5)), _mm256_add_epi32(p(6), p(7))),
                );
                let dy = _mm256_set1_ps(sides[t].get_unchecked(b).d);
                acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(sumi), acc[t]);
            }
        }
        rows_out(&acc)
    }
}
