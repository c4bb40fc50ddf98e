//! Q6_K x8 on AVX-512 VNNI: two groups (16 rows) × `T` tokens per call, from one token on;
//! bit for bit the AVX2 kernel's results. Each block's prefetches are spread over its
//! sub-blocks ([`prefetch_part`]).
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features, groups `g` and `g + 1` to
//! exist, activations from the crate's quantizers and `a`/`sides` with at least `w.nb` entries
//! per token.

use std::arch::x86_64::*;

use super::{BlockQ6Kx8, Q6Kx8};
use crate::kernels::packed::avx512::{bcast4, lines, row_pairs, rows_f32, rows_i8, rows_out};
use crate::kernels::packed::prefetch::prefetch_part;
use crate::kernels::packed::{width_table, Grouped, PackedKernels, GROUP, PAIR};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8K;

pub(super) const KERNELS: PackedKernels<Q6Kx8> = PackedKernels {
    pair: Some(width_table!(Q6Kx8, PAIR, q6_kx8_pair)),
    pair_isa: "avx512",
    pair_min: 1,
    ..super::avx2::KERNELS
};

tf! {
/// A Q6_K quant per byte, `(v & 15) | top`, from a byte whose low nibble is its low bits
/// and [`q6_k_top`]'s high bits: one `vpternlogd` for the mask and the join.
#[inline]
pub(super) unsafe fn q6_k_join(v: __m512i, top: __m512i) -> __m512i {
    _mm512_ternarylogic_epi32::<0xEC>(v, top, _mm512_set1_epi8(15))
}

/// Bits `2m..2m + 2` of each byte of `h` (a Q6_K high-bits line) moved to bits 4..6.
#[inline]
pub(super) unsafe fn q6_k_top(h: __m512i, m: usize) -> __m512i {
    let shifted = match m {
        0 => _mm512_slli_epi16(h, 4),
        1 => _mm512_slli_epi16(h, 2),
        2 => h,
        _ => _mm512_srli_epi16(h, 2),
    };
    _mm512_and_si512(shifted, _mm512_set1_epi8(0x30))
}

/// Q6_K x8 groups `g`, `g + 1` × `T` tokens. Per 16-quant chunk the 4 registers' products go
/// into one i32 sum per (row, token), which one `vpmulld` scales; the offset of 32 comes off
/// once per block through the activation sums, as in the AVX2 kernel.
///
/// # Safety
/// See the module docs.
pub unsafe fn q6_kx8_pair<const T: usize>(
    w: &Grouped<BlockQ6Kx8>,
    g: usize,
    a: [&[BlockQ8K]; T],
) -> [[f32; PAIR]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        let (top, join) = (q6_k_top, q6_k_join);
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
                let line = |i: usize| lines(&x0.lines[j][i], &x1.lines[j][i]);
                let (mut sa, mut sb) = ([_mm512_setzero_si512(); T], [_mm512_setzero_si512(); T]);
                for h in 0..2 {
                    let (h0, h1) = (line(4), line(5));
                    let (m0, m1) = (2 * h, 2 * h + 1);
                    let (v0, v1) = (line(m0), line(m1));
                    let q = [
                        join(v0, top(h0, m0)),
                        join(v1, top(h0, m1)),
                        join(_mm512_srli_epi16(v0, 4), top(h1, m0)),
                        join(_mm512_srli_epi16(v1, 4), top(h1, m1)),
                    ];
                    let reg = [8 * j + m0, 8 * j + m1, 8 * j + m0 + 4, 8 * j + m1 + 4];
                    for t in 0..T {
                        let p = |k: usize| bcast4(y[t].add(4 * reg[k]));
                        sa[t] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sa[t], q[0], p(0)), q[1], p(1));
                        sb[t] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sb[t], q[2], p(2)), q[3], p(3));
                    }
                }
                // Chunks 2j (registers 8j..8j+4) and 2j+1 (8j+4..8j+8).
                let sca = rows_i8(&x0.scales[2 * j], &x1.scales[2 * j]);
                let scb = rows_i8(&x0.scales[2 * j + 1], &x1.scales[2 * j + 1]);
                for t in 0..T {
                    let s = _mm512_add_epi32(_mm512_mullo_epi32(sa[t], sca), _mm512_mullo_epi32(sb[t], scb));
                    isum[t] = _mm512_add_epi32(isum[t], s);
                }
            }
            let bytes = |v: &[i8; GROUP]| &*(v as *const [i8; GROUP] as *const [u8; GROUP]);
            let sp = each!(8, _mm512_setzero_si512(), |c| row_pairs(
                (bytes(&x0.scales[2 * c]), bytes(&x1.scales[2 * c])),
                (bytes(&x0.scales[2 * c + 1]), bytes(&x1.scales[2 * c + 1])),
                true,
            ));
            let d = rows_f32(&x0.d, &x1.d);
            for t in 0..T {
                let yt = a[t].get_unchecked(b);
                // The offset of 32: Σ over chunks of scale · (32 · activation sum).
                let mut off = _mm512_setzero_si512();
                for (c, sp) in sp.iter().enumerate() {
                    let bsum = _mm512_set1_epi32((yt.bsums.as_ptr().add(2 * c) as *const i32).read_unaligned());
                    off = _mm512_dpwssd_epi32(off, *sp, bsum);
                }
                let isum = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(off, 5));
                let dy = _mm512_set1_ps(yt.d);
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(isum), acc[t]);
            }
        }
        rows_out(&acc)
    }
}
}
