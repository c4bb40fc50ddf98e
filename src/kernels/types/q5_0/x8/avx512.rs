//! Q5_0 x8 on AVX-512 VNNI: two groups (16 rows) × `T` tokens per call, one `vpdpbusd` per
//! register with the 4 activation bytes broadcast from memory. Per (row, token) the integer
//! sums and f32 steps are the AVX2 kernel's, so the two agree bit for bit. Below 6 tokens the
//! AVX2 one-group kernels measured faster (joining the two groups' lines costs more than the
//! wider multiply-adds save).
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features, groups `g` and `g + 1` to
//! exist, activations from the crate's quantizers and `a`/`sides` with at least `w.nb` entries
//! per token.

use std::arch::x86_64::*;

use super::Q5_0x8;
use crate::kernels::activations::Q8Side;
use crate::kernels::packed::avx512::{bcast4, lines, rows_f32, rows_out};
use crate::kernels::packed::{width_table, PackedKernels, PAIR};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8_0;

pub(super) const KERNELS: PackedKernels<Q5_0x8> = PackedKernels {
    pair: Some(width_table!(Q5_0x8, PAIR, q5_0x8_pair, first_sides)),
    pair_isa: "avx512",
    pair_min: 6,
    ..super::avx2::KERNELS
};

tf! {
/// Blocks `x0` and `x1` (indices into `w`'s blocks) as 8 registers of unsigned 5-bit quants:
/// register `k` holds quants `4k..4k + 4` of each row (rows of `x0` in lanes 0..8).
#[inline]
pub(super) unsafe fn q5_0_registers(w: &Q5_0x8, x0: usize, x1: usize) -> [__m512i; 8] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let (m4, b4) = (_mm512_set1_epi8(15), _mm512_set1_epi8(16));
        let (qs, qh) = (&w.qs[..], &w.qh[..]);
        let p = each!(4, _mm512_setzero_si512(), |k| lines(&qs[x0 * 4 + k], &qs[x1 * 4 + k]));
        let h = lines(&qh[x0], &qh[x1]);
        // Bit k of each byte of `h` moved to bit 4, as in the AVX2 unpacking.
        let hb = |v: __m512i| _mm512_and_si512(v, b4);
        let lo = |v: __m512i| _mm512_and_si512(v, m4);
        let hi = |v: __m512i| _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        [
            _mm512_or_si512(lo(p[0]), hb(_mm512_slli_epi16(h, 4))),
            _mm512_or_si512(lo(p[1]), hb(_mm512_slli_epi16(h, 3))),
            _mm512_or_si512(lo(p[2]), hb(_mm512_slli_epi16(h, 2))),
            _mm512_or_si512(lo(p[3]), hb(_mm512_slli_epi16(h, 1))),
            _mm512_or_si512(hi(p[0]), hb(h)),
            _mm512_or_si512(hi(p[1]), hb(_mm512_srli_epi16(h, 1))),
            _mm512_or_si512(hi(p[2]), hb(_mm512_srli_epi16(h, 2))),
            _mm512_or_si512(hi(p[3]), hb(_mm512_srli_epi16(h, 3))),
        ]
    }
}

/// Q5_0x8 groups `g`, `g + 1` × `T` tokens: `out[t][r]`, rows of `g` first.
///
/// # Safety
/// See the module docs.
pub unsafe fn q5_0x8_pair<const T: usize>(
    w: &Q5_0x8,
    g: usize,
    a: [&[BlockQ8_0]; T],
    sides: [&[Q8Side]; T],
) -> [[f32; PAIR]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        let wd = &w.d[..];
        for b in 0..w.nb {
            let (x0, x1) = (g * w.nb + b, (g + 1) * w.nb + b);
            w.prefetch_block(x0);
            w.prefetch_block(x1);
            let q = q5_0_registers(w, x0, x1);
            let dw = rows_f32(&wd[x0], &wd[x1]);
            for t in 0..T {
                let y = a[t].get_unchecked(b).qs.as_ptr();
                // Two chains, so a lone token is not bound by the instruction's latency.
                let (mut s0, mut s1) = (_mm512_setzero_si512(), _mm512_setzero_si512());
                for k in 0..4 {
                    s0 = _mm512_dpbusd_epi32(s0, q[k], bcast4(y.add(4 * k)));
                    s1 = _mm512_dpbusd_epi32(s1, q[k + 4], bcast4(y.add(4 * k + 16)));
                }
                let side = sides[t].get_unchecked(b);
                let sumi = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(side.offset16));
                let dy = _mm512_set1_ps(side.d);
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(sumi), acc[t]);
            }
        }
        rows_out(&acc)
    }
}
}
