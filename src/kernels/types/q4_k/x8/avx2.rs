//! Q4_K x8 on AVX2: 8 rows × `T` tokens per call, register-blocked so each unpacked register
//! serves every token (see the kernel's docs).
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C, activations from the crate's quantizers
//! and `a` with at least `w.nb` blocks per token.

use std::arch::x86_64::*;

use super::{BlockQ4Kx8, Q4Kx8};
use crate::kernels::packed::avx2::{bcast4_k, pairs_u8, rows_f32, rows_out};
use crate::kernels::packed::{width_table, Grouped, PackedKernels, GROUP};
use crate::quant::blocks::BlockQ8K;

pub(super) const KERNELS: PackedKernels<Q4Kx8> = PackedKernels {
    group: Some(width_table!(Q4Kx8, GROUP, q4_kx8_group)),
    group_isa: "avx2",
    ..PackedKernels::scalar(super::WIDTH)
};

/// Q4_K x8 rows of group `g` × `T` tokens: `out[t][r]`.
///
/// Register-blocked: a quarter sub-block's 4 unpacked registers (8 rows × 16 quants) stay in
/// registers while every token passes over them, so weights are read and unpacked once per
/// `T` tokens, and the 8 registers of a sub-block are summed in i16 (8 · 2 · 15 · 127 <
/// 2^15) before one `vpmaddwd` applies the 8 rows' scales. Up to 4 tokens keep their i16 sums
/// over the whole sub-block; more apply the scales per half, so the accumulators still fit
/// the 16 registers.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_kx8_group<const T: usize>(
    w: &Grouped<BlockQ4Kx8>,
    g: usize,
    a: [&[BlockQ8K]; T],
) -> [[f32; GROUP]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm256_set1_epi8(15);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..w.nb {
            w.prefetch_block(g, b);
            let x = w.block(g, b);
            let y = each!(T, a[0].get_unchecked(b), |t| a[t].get_unchecked(b));
            let line = |l: usize| _mm256_load_si256(x.qs[l].0.as_ptr() as *const __m256i);
            let mut isum = [_mm256_setzero_si256(); T];
            for j in 0..8 {
                let sc = pairs_u8(&x.scales[j], &x.scales[j]);
                let mut s16 = [_mm256_setzero_si256(); T];
                for h in 0..2 {
                    // Lines 4j + 2h and 4j + 2h + 1: registers 8j + 2h + {0, 1} (low nibbles)
                    // and 8j + 2h + {4, 5} (high nibbles).
                    let l = 4 * j + 2 * h;
                    let (v0, v1) = (line(l), line(l + 1));
                    let q = [
                        _mm256_and_si256(v0, m4),
                        _mm256_and_si256(v1, m4),
                        _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4),
                        _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4),
                    ];
                    let reg = [
                        8 * j + 2 * h,
                        8 * j + 2 * h + 1,
                        8 * j + 2 * h + 4,
                        8 * j + 2 * h + 5,
                    ];
                    for t in 0..T {
                        let p = |k: usize| _mm256_maddubs_epi16(q[k], bcast4_k(y[t], reg[k]));
                        let s = _mm256_add_epi16(
                            _mm256_add_epi16(p(0), p(1)),
                            _mm256_add_epi16(p(2), p(3)),
                        );
                        if T > 4 {
                            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s, sc));
                        } else {
                            s16[t] = _mm256_add_epi16(s16[t], s);
                        }
                    }
                }
                if T <= 4 {
                    for t in 0..T {
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
                    }
                }
            }
            // Mins: row r subtracts dmin_r · Σ_j min[j][r] · (sum of sub-block j's activations).
            // The 32-quant sums come from the 16-quant ones, packed to i16 pairs (S_2i, S_2i+1).
            let mn = each!(4, _mm256_setzero_si256(), |i| pairs_u8(
                &x.mins[2 * i],
                &x.mins[2 * i + 1]
            ));
            let (d, dmin) = (rows_f32(&x.d), rows_f32(&x.dmin));
            for t in 0..T {
                let bs = _mm256_loadu_si256(y[t].bsums.as_ptr() as *const __m256i);
                let s32 = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
                // Per 128-bit lane: [S0 S1 S2 S3 S0 S1 S2 S3 | S4 S5 S6 S7 S4 S5 S6 S7].
                let s16 = _mm256_packs_epi32(s32, s32);
                let pair = |i: i32| _mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(i));
                let summ = _mm256_add_epi32(
                    _mm256_add_epi32(
                        _mm256_madd_epi16(mn[0], pair(0)),
                        _mm256_madd_epi16(mn[1], pair(1)),
                    ),
                    _mm256_add_epi32(
                        _mm256_madd_epi16(mn[2], pair(4)),
                        _mm256_madd_epi16(mn[3], pair(5)),
                    ),
                );
                let dy = _mm256_set1_ps(y[t].d);
                let acc_t =
                    _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(isum[t]), acc[t]);
                acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dy), _mm256_cvtepi32_ps(summ), acc_t);
            }
        }
        rows_out(&acc)
    }
}
