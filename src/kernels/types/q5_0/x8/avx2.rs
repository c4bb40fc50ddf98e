//! Q5_0 x8 on AVX2: 8 rows × `T` tokens per call. Per block and register one broadcast of 4
//! activation bytes and one `vpmaddubsw` for 8 rows; four registers' i16 pair sums are added
//! before one `vpmaddwd` (4 · 2 · 31 · 127 < 2^15, exact), and the scale conversion and
//! multiply-add happen once per 8 rows. The offset of 16 comes off per block through the
//! activations' [`Q8Side`].
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C, activations from the crate's quantizers
//! and `a`/`sides` with at least `w.nb` entries per token.

use std::arch::x86_64::*;

use super::Q5_0x8;
use crate::kernels::activations::Q8Side;
use crate::kernels::packed::avx2::{bcast4, rows_out};
use crate::kernels::packed::{width_table, PackedKernels, GROUP};
use crate::quant::blocks::BlockQ8_0;

pub(super) const KERNELS: PackedKernels<Q5_0x8> = PackedKernels {
    group: Some(width_table!(Q5_0x8, GROUP, q5_0x8_group, first_sides)),
    group_isa: "avx2",
    ..PackedKernels::scalar(8)
};

/// The 8 unpacked registers of Q5_0x8 block `gb` (quants 0..=31).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_q5_0x8(w: &Q5_0x8, gb: usize) -> [__m256i; 8] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm256_set1_epi8(15);
        let b4 = _mm256_set1_epi8(16);
        let p = w.qs.as_ptr().add(gb * 4) as *const __m256i;
        let h = _mm256_load_si256(w.qh.as_ptr().add(gb) as *const __m256i);
        let (p0, p1, p2, p3) = (
            _mm256_load_si256(p),
            _mm256_load_si256(p.add(1)),
            _mm256_load_si256(p.add(2)),
            _mm256_load_si256(p.add(3)),
        );
        // Bit k of each byte of `h` moved to bit 4 (16-bit shifts: the mask keeps in-byte bits).
        let hb = |v: __m256i| _mm256_and_si256(v, b4);
        let lo = |v: __m256i| _mm256_and_si256(v, m4);
        let hi = |v: __m256i| _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        [
            _mm256_or_si256(lo(p0), hb(_mm256_slli_epi16(h, 4))),
            _mm256_or_si256(lo(p1), hb(_mm256_slli_epi16(h, 3))),
            _mm256_or_si256(lo(p2), hb(_mm256_slli_epi16(h, 2))),
            _mm256_or_si256(lo(p3), hb(_mm256_slli_epi16(h, 1))),
            _mm256_or_si256(hi(p0), hb(h)),
            _mm256_or_si256(hi(p1), hb(_mm256_srli_epi16(h, 1))),
            _mm256_or_si256(hi(p2), hb(_mm256_srli_epi16(h, 2))),
            _mm256_or_si256(hi(p3), hb(_mm256_srli_epi16(h, 3))),
        ]
    }
}

/// Rows of group `g` × `T` tokens: `out[t][r]`.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q5_0x8_group<const T: usize>(
    w: &Q5_0x8,
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
            let q = unpack_q5_0x8(w, gb);
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(w.d.as_ptr().add(gb) as *const __m128i));
            for t in 0..T {
                let y = a[t].get_unchecked(b);
                let half = |k0: usize| {
                    let p = |k: usize| _mm256_maddubs_epi16(q[k], bcast4(y, k));
                    let s = _mm256_add_epi16(
                        _mm256_add_epi16(p(k0), p(k0 + 1)),
                        _mm256_add_epi16(p(k0 + 2), p(k0 + 3)),
                    );
                    _mm256_madd_epi16(s, ones)
                };
                // Broadcasts straight from memory: no scalar work per token and block.
                let side = sides[t].get_unchecked(b);
                let off = _mm256_set1_epi32(side.offset16);
                let sumi = _mm256_sub_epi32(_mm256_add_epi32(half(0), half(4)), off);
                let dy = _mm256_set1_ps(side.d);
                acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(sumi), acc[t]);
            }
        }
        rows_out(&acc)
    }
}
