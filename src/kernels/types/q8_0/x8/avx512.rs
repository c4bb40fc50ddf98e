//! Q8_0 x8 on AVX-512 VNNI: two groups (16 rows) × `T` tokens per call; bit for bit the AVX2
//! kernel's results. Below 6 tokens the AVX2 one-group kernels measured faster.
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features, groups `g` and `g + 1` to
//! exist, activations from the crate's quantizers and `a`/`sides` with at least `w.nb` entries
//! per token.

use std::arch::x86_64::*;

use super::Q8_0x8;
use crate::kernels::activations::Q8Side;
use crate::kernels::packed::avx512::{bcast4, lines, rows_f32, rows_out};
use crate::kernels::packed::{width_table, PackedKernels, PAIR};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8_0;

pub(super) const KERNELS: PackedKernels<Q8_0x8> = PackedKernels {
    pair: Some(width_table!(Q8_0x8, PAIR, q8_0x8_pair, first_sides)),
    pair_isa: "avx512",
    pair_min: 6,
    ..super::avx2::KERNELS
};

tf! {
/// Q8_0x8 groups `g`, `g + 1` × `T` tokens. The signed quants are flipped to `w + 128`
/// (`vpdpbusd` takes one unsigned side) once per block; `128 · Σa` (= 8 · `offset16`) comes
/// off per token.
///
/// # Safety
/// See the module docs.
pub unsafe fn q8_0x8_pair<const T: usize>(
    w: &Q8_0x8,
    g: usize,
    a: [&[BlockQ8_0]; T],
    sides: [&[Q8Side]; T],
) -> [[f32; PAIR]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let flip = _mm512_set1_epi8(-128);
        let mut acc = [_mm512_setzero_ps(); T];
        let (qs, wd) = (&w.qs[..], &w.d[..]);
        for b in 0..w.nb {
            let (x0, x1) = (g * w.nb + b, (g + 1) * w.nb + b);
            w.prefetch_block(x0);
            w.prefetch_block(x1);
            let q = each!(8, _mm512_setzero_si512(), |k| {
                _mm512_xor_si512(lines(&qs[x0 * 8 + k], &qs[x1 * 8 + k]), flip)
            });
            let dw = rows_f32(&wd[x0], &wd[x1]);
            for t in 0..T {
                let y = a[t].get_unchecked(b).qs.as_ptr();
                let (mut s0, mut s1) = (_mm512_setzero_si512(), _mm512_setzero_si512());
                for k in 0..4 {
                    s0 = _mm512_dpbusd_epi32(s0, q[k], bcast4(y.add(4 * k)));
                    s1 = _mm512_dpbusd_epi32(s1, q[k + 4], bcast4(y.add(4 * k + 16)));
                }
                let side = sides[t].get_unchecked(b);
                let off = _mm512_set1_epi32(side.offset16 << 3);
                let sumi = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), off);
                let dy = _mm512_set1_ps(side.d);
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(sumi), acc[t]);
            }
        }
        rows_out(&acc)
    }
}
}
