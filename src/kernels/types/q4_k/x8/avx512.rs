//! Q4_K x8 on AVX-512 VNNI: two groups (16 rows) × `T` tokens per call, from one token on;
//! bit for bit the AVX2 kernel's results. Each block's prefetches are spread over its
//! sub-blocks ([`prefetch_part`]).
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features, groups `g` and `g + 1` to
//! exist, activations from the crate's quantizers and `a`/`sides` with at least `w.nb` entries
//! per token.

use std::arch::x86_64::*;

use super::{BlockQ4Kx8, Q4Kx8};
use crate::kernels::activations::Q8KSide;
use crate::kernels::packed::avx512::{bcast4, lines, row_pairs, rows_f32, rows_out, rows_u8};
use crate::kernels::packed::prefetch::prefetch_part;
use crate::kernels::packed::{width_table, Grouped, PackedKernels, PAIR};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8K;

pub(super) const KERNELS: PackedKernels<Q4Kx8> = PackedKernels {
    pair: Some(width_table!(Q4Kx8, PAIR, q4_kx8_pair, first_sides)),
    pair_isa: "avx512",
    pair_min: 1,
    ..super::avx2::KERNELS
};

tf! {
/// Both groups' Q4_K mins as i16 pairs `(m[2i][r], m[2i + 1][r])` per 32-bit lane, for
/// [`q4_k_min_sums`].
#[inline]
pub(super) unsafe fn q4_k_min_pairs(x0: &BlockQ4Kx8, x1: &BlockQ4Kx8) -> [__m512i; 4] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        each!(4, _mm512_setzero_si512(), |i| row_pairs(
            (&x0.mins[2 * i], &x1.mins[2 * i]),
            (&x0.mins[2 * i + 1], &x1.mins[2 * i + 1]),
            false,
        ))
    }
}

/// Per row `Σ_j min[j][r] · S_j`, with `S_j` a token block's sum over sub-block `j`, from its
/// [`Q8KSide`]: one `vpmaddwd` and three `vpdpwssd`, each with its pair broadcast from memory.
#[inline]
pub(super) unsafe fn q4_k_min_sums(mn: &[__m512i; 4], side: &Q8KSide) -> __m512i {
    let p = |i: usize| _mm512_set1_epi32(side.min_pairs[i]);
    let summ = _mm512_dpwssd_epi32(_mm512_madd_epi16(mn[0], p(0)), mn[1], p(1));
    _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(summ, mn[2], p(2)), mn[3], p(3))
}

/// Q4_K x8 groups `g`, `g + 1` × `T` tokens. Per sub-block the 8 registers' products go
/// into one i32 sum per (row, token), which one `vpmulld` scales.
///
/// # Safety
/// See the module docs.
pub unsafe fn q4_kx8_pair<const T: usize>(
    w: &Grouped<BlockQ4Kx8>,
    g: usize,
    a: [&[BlockQ8K]; T],
    sides: [&[Q8KSide]; T],
) -> [[f32; PAIR]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm512_set1_epi8(15);
        let mut acc = [_mm512_setzero_ps(); T];
        let blocks = &w.blocks[..];
        for b in 0..w.nb {
            let (x0, x1) = (&blocks[g * w.nb + b], &blocks[(g + 1) * w.nb + b]);
            let mut y = [std::ptr::null(); T];
            for t in 0..T {
                y[t] = a[t].get_unchecked(b).qs.as_ptr();
            }
            let mut isum = [_mm512_setzero_si512(); T];
            for j in 0..8 {
                prefetch_part(x0, j);
                prefetch_part(x1, j);
                let sc = rows_u8(&x0.scales[j], &x1.scales[j]);
                let mut s = [_mm512_setzero_si512(); T];
                for h in 0..2 {
                    // Lines 4j + 2h and 4j + 2h + 1: registers 8j + 2h + {0, 1} (low nibbles)
                    // and 8j + 2h + {4, 5} (high nibbles).
                    let l = 4 * j + 2 * h;
                    let (v0, v1) = (lines(&x0.qs[l], &x1.qs[l]), lines(&x0.qs[l + 1], &x1.qs[l + 1]));
                    let q = [
                        _mm512_and_si512(v0, m4),
                        _mm512_and_si512(v1, m4),
                        _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4),
                        _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4),
                    ];
                    let reg = [8 * j + 2 * h, 8 * j + 2 * h + 1, 8 * j + 2 * h + 4, 8 * j + 2 * h + 5];
                    for t in 0..T {
                        for k in 0..4 {
                            s[t] = _mm512_dpbusd_epi32(s[t], q[k], bcast4(y[t].add(4 * reg[k])));
                        }
                    }
                }
                for t in 0..T {
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t], sc));
                }
            }
            // Mins: row r subtracts dmin_r · Σ_j min[j][r] · (sub-block j's activation sum).
            let mn = q4_k_min_pairs(x0, x1);
            let (d, dmin) = (rows_f32(&x0.d, &x1.d), rows_f32(&x0.dmin, &x1.dmin));
            for t in 0..T {
                let yt = a[t].get_unchecked(b);
                let summ = q4_k_min_sums(&mn, sides[t].get_unchecked(b));
                let dy = _mm512_set1_ps(yt.d);
                let acc_t = _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(isum[t]), acc[t]);
                acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dy), _mm512_cvtepi32_ps(summ), acc_t);
            }
        }
        rows_out(&acc)
    }
}
}
