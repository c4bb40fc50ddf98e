//! Q6_K x8 on AVX2: 8 rows × `T` tokens per call, register-blocked so each unpacked register
//! serves every token (see the kernel's docs).
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C, activations from the crate's quantizers
//! and `a` with at least `w.nb` blocks per token.

use std::arch::x86_64::*;

use super::{BlockQ6Kx8, Q6Kx8};
use crate::kernels::packed::avx2::{bcast4_k, bsum_pair, pairs_i8, rows_f32, rows_out};
use crate::kernels::packed::{width_table, Grouped, Line32, PackedKernels, GROUP};
use crate::quant::blocks::BlockQ8K;

pub(super) const KERNELS: PackedKernels<Q6Kx8> = PackedKernels {
    group: Some(width_table!(Q6Kx8, GROUP, q6_kx8_group)),
    group_isa: "avx2",
    ..PackedKernels::scalar(super::WIDTH)
};

/// Q6_K x8 rows of group `g` × `T` tokens: `out[t][r]`.
///
/// Register-blocked like [`q4_kx8_group`]: per half sub-block, 4 unpacked registers (two of
/// each 16-quant chunk) serve every token; each chunk's two `vpmaddubsw` results are summed
/// in i16 before its `vpmaddwd`.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q6_kx8_group<const T: usize>(
    w: &Grouped<BlockQ6Kx8>,
    g: usize,
    a: [&[BlockQ8K]; T],
) -> [[f32; GROUP]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm256_set1_epi8(15);
        let m2 = _mm256_set1_epi8(0x30);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..w.nb {
            w.prefetch_block(g, b);
            let x = w.block(g, b);
            let y = each!(T, a[0].get_unchecked(b), |t| a[t].get_unchecked(b));
            let load = |l: &Line32| _mm256_load_si256(l.0.as_ptr() as *const __m256i);
            // Bits 2m..2m+2 of each byte moved to bits 4..6 (16-bit shifts: the mask keeps
            // in-byte bits).
            let top = |h: __m256i, m: usize| {
                _mm256_and_si256(
                    match m {
                        0 => _mm256_slli_epi16(h, 4),
                        1 => _mm256_slli_epi16(h, 2),
                        2 => h,
                        _ => _mm256_srli_epi16(h, 2),
                    },
                    m2,
                )
            };
            let mut isum = [_mm256_setzero_si256(); T];
            for j in 0..8 {
                // Chunks 2j (registers 8j..8j+4) and 2j+1 (8j+4..8j+8).
                let sa = pairs_i8(&x.scales[2 * j], &x.scales[2 * j]);
                let sb = pairs_i8(&x.scales[2 * j + 1], &x.scales[2 * j + 1]);
                for h in 0..2 {
                    let (h0, h1) = (load(&x.lines[j][4]), load(&x.lines[j][5]));
                    let (m0, m1) = (2 * h, 2 * h + 1);
                    let (v0, v1) = (load(&x.lines[j][m0]), load(&x.lines[j][m1]));
                    let q = [
                        _mm256_or_si256(_mm256_and_si256(v0, m4), top(h0, m0)),
                        _mm256_or_si256(_mm256_and_si256(v1, m4), top(h0, m1)),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4),
                            top(h1, m0),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4),
                            top(h1, m1),
                        ),
                    ];
                    let reg = [8 * j + m0, 8 * j + m1, 8 * j + m0 + 4, 8 * j + m1 + 4];
                    for t in 0..T {
                        let p = |k: usize| _mm256_maddubs_epi16(q[k], bcast4_k(y[t], reg[k]));
                        let s = _mm256_add_epi32(
                            _mm256_madd_epi16(_mm256_add_epi16(p(0), p(1)), sa),
                            _mm256_madd_epi16(_mm256_add_epi16(p(2), p(3)), sb),
                        );
                        isum[t] = _mm256_add_epi32(isum[t], s);
                    }
                }
            }
            let d = rows_f32(&x.d);
            for t in 0..T {
                // The offset of 32: sum over chunks of scale · (32 · activation sum). The scale
                // pairs are rebuilt per token: hoisting them into 8 registers measured no faster
                // (they spill).
                let mut off = _mm256_setzero_si256();
                for c in 0..8 {
                    let sp = pairs_i8(&x.scales[2 * c], &x.scales[2 * c + 1]);
                    off = _mm256_add_epi32(off, _mm256_madd_epi16(sp, bsum_pair(y[t], c)));
                }
                let isum = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, 5));
                let dy = _mm256_set1_ps(y[t].d);
                acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(isum), acc[t]);
            }
        }
        rows_out(&acc)
    }
}
