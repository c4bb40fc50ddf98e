//! The generic 32-quant kernel on AVX-512 VNNI: two groups (16 rows) × `T` tokens per call,
//! one `vpdpbusd` per register with the 4 activation bytes broadcast from memory; per (row,
//! token) the AVX2 kernel's integer sums and f32 steps, so the two agree bit for bit.
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features, groups `g` and `g + 1` to
//! exist, activations from the crate's quantizers and `a`/`sides` with at least `w.nb` entries
//! per token.

use std::arch::x86_64::*;

use super::{Q32x8, Q32};
use crate::kernels::activations::Q8Side;
use crate::kernels::packed::avx512::{bcast4, lines, rows_f32, rows_out};
use crate::kernels::packed::PAIR;
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8_0;

/// A [`Q32`] type's AVX-512 unpacking (unsigned bytes for `vpdpbusd`).
pub(crate) trait Q32Avx512: Q32 {
    /// What the registers' bytes carry above the quants' values (without mins).
    const OFFSET_AVX512: i32 = Self::OFFSET;

    /// The registers' bytes from their codes.
    ///
    /// # Safety
    /// The AVX-512 path's features.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn bytes(codes: [__m512i; 8]) -> [__m512i; 8] {
        codes
    }
}

tf! {
/// The 8 registers' codes of blocks `x0` and `x1` (indices into `w`'s blocks; rows of `x0` in
/// lanes 0..8).
#[inline]
pub(crate) unsafe fn codes<S: Q32>(w: &Q32x8<S>, x0: usize, x1: usize) -> [__m512i; 8] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm512_set1_epi8(15);
        let qs = &w.qs[..];
        let p = each!(4, _mm512_setzero_si512(), |i| lines(&qs[x0 * 4 + i], &qs[x1 * 4 + i]));
        let nibbles = each!(8, _mm512_setzero_si512(), |k| {
            let v = p[k % 4];
            _mm512_and_si512(if k < 4 { v } else { _mm512_srli_epi16(v, 4) }, m4)
        });
        if !S::FIFTH_BIT {
            return nibbles;
        }
        let h = lines(&w.qh[x0], &w.qh[x1]);
        each!(8, _mm512_setzero_si512(), |k| _mm512_or_si512(
            nibbles[k],
            crate::kernels::packed::kquant::avx512::bit_to(h, k, 4)
        ))
    }
}

/// Groups `g`, `g + 1` × `T` tokens: `out[t][r]`, rows of `g` first.
///
/// # Safety
/// See the module docs.
pub(crate) unsafe fn pair<S: Q32Avx512, const T: usize>(
    w: &Q32x8<S>,
    g: usize,
    a: [&[BlockQ8_0]; T],
    sides: [&[Q8Side]; T],
) -> [[f32; PAIR]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..w.nb {
            let (x0, x1) = (g * w.nb + b, (g + 1) * w.nb + b);
            w.prefetch_block(x0);
            w.prefetch_block(x1);
            let q = S::bytes(codes(w, x0, x1));
            let dw = rows_f32(&w.d[x0], &w.d[x1]);
            for t in 0..T {
                let y = a[t].get_unchecked(b).qs.as_ptr();
                // Two chains, so a lone token is not bound by the instruction's latency.
                let (mut s0, mut s1) = (_mm512_setzero_si512(), _mm512_setzero_si512());
                for k in 0..4 {
                    s0 = _mm512_dpbusd_epi32(s0, q[k], bcast4(y.add(4 * k)));
                    s1 = _mm512_dpbusd_epi32(s1, q[k + 4], bcast4(y.add(4 * k + 16)));
                }
                let side = sides[t].get_unchecked(b);
                let suma = side.offset16 >> 4;
                let sumi = _mm512_add_epi32(s0, s1);
                let dy = _mm512_set1_ps(side.d);
                if S::MIN {
                    let m = rows_f32(&w.m[x0], &w.m[x1]);
                    let a = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(sumi), acc[t]);
                    acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(side.d * suma as f32), a);
                } else {
                    let sumi = _mm512_sub_epi32(sumi, _mm512_set1_epi32(S::OFFSET_AVX512 * suma));
                    acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(sumi), acc[t]);
                }
            }
        }
        rows_out(&acc)
    }
}
}
