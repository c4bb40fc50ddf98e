//! The generic K-quant kernel on AVX-512 VNNI: two groups (16 rows) × `T` tokens per call,
//! from one token on; per register one `vpdpbusd` with the 4 activation bytes broadcast from
//! memory, per sub-block one `vpmulld` by the scales. Bit for bit the AVX2 kernel's results.
//! Each block's prefetches are spread over its sub-blocks ([`prefetch_part`]).
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features, groups `g` and `g + 1` to
//! exist, activations from the crate's quantizers and `a`/`sides` with at least `w.nb` entries
//! per token.

use std::arch::x86_64::*;

use super::{subs, KQuant};
use crate::kernels::activations::Q8KSide;
use crate::kernels::packed::avx512::{bcast4, lines, row_pairs, rows_f32, rows_out};
use crate::kernels::packed::prefetch::prefetch_part;
use crate::kernels::packed::{Grouped, Line32, GROUP, PAIR};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8K;

/// Most sub-block pairs of a block (16-quant sub-blocks).
const MAX_PAIRS: usize = 8;

/// A [`KQuant`] block's AVX-512 unpacking, two groups at a time (rows of `x0` in lanes 0..8).
pub(crate) trait KQuantAvx512: KQuant {
    /// What the registers' bytes carry above the quants' values (unsigned bytes for
    /// `vpdpbusd`).
    const OFFSET_AVX512: i32 = Self::OFFSET;

    /// Registers `8j..8j + 8` (sub-block `j` of 32 quants) of both groups as unsigned bytes.
    ///
    /// # Safety
    /// The AVX-512 path's features.
    unsafe fn registers(x0: &Self, x1: &Self, j: usize) -> [__m512i; 8];

    /// Sub-block `s`'s scale per row, as i32 lanes.
    ///
    /// # Safety
    /// As for `registers`.
    unsafe fn scales(x0: &Self, x1: &Self, s: usize) -> __m512i;

    /// Per row the i16 pair `(coef_{2i}, coef_{2i+1})` of the mins (or scales) of sub-blocks
    /// `2i` and `2i + 1`.
    ///
    /// # Safety
    /// As for `registers`.
    unsafe fn coef_pairs(x0: &Self, x1: &Self, i: usize) -> __m512i;
}

tf! {
/// Per row `Σ_s coef_s · A_s` of one token block (`coef` from [`coef_pairs`]): one
/// `vpdpwssd` per pair of sub-blocks with the activation sums broadcast.
#[inline]
pub(crate) unsafe fn corrections<S: KQuant>(
    coef: &[__m512i; MAX_PAIRS],
    bsums: &[i16; 16],
    side: &Q8KSide,
) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut corr = _mm512_setzero_si512();
        for (i, c) in coef.iter().enumerate().take(subs::<S>() / 2) {
            let sums = if S::SUB == 16 {
                (bsums.as_ptr().add(2 * i) as *const i32).read_unaligned()
            } else {
                side.min_pairs[i]
            };
            corr = _mm512_dpwssd_epi32(corr, *c, _mm512_set1_epi32(sums));
        }
        corr
    }
}

/// [`KQuantAvx512::coef_pairs`] of a layout whose groups' scales are signed bytes,
/// `scales[group]`: the coefficients of groups `2i` and `2i + 1`, for rows `x0` and `x1`.
///
/// # Safety
/// AVX-512 (F, BW).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn signed_coef_pairs(
    x0: &[[i8; GROUP]],
    x1: &[[i8; GROUP]],
    i: usize,
) -> __m512i {
    let bytes = |v: &[i8; GROUP]| {
        // SAFETY: i8 and u8 have one layout; `row_pairs` reads them as signed (`true`).
        unsafe { &*(v as *const [i8; GROUP] as *const [u8; GROUP]) }
    };
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        row_pairs(
            (bytes(&x0[2 * i]), bytes(&x1[2 * i])),
            (bytes(&x0[2 * i + 1]), bytes(&x1[2 * i + 1])),
            true,
        )
    }
}

/// Every [`KQuantAvx512::coef_pairs`] of a block.
#[inline]
pub(crate) unsafe fn coef_pairs<S: KQuantAvx512>(x0: &S, x1: &S) -> [__m512i; MAX_PAIRS] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut c = [_mm512_setzero_si512(); MAX_PAIRS];
        for (i, c) in c.iter_mut().enumerate().take(subs::<S>() / 2) {
            *c = S::coef_pairs(x0, x1, i);
        }
        c
    }
}

/// One block's f32 step for 16 rows and one token (the module docs of [`super`]).
#[inline]
pub(crate) unsafe fn finish<S: KQuant>(
    (d, dmin): (__m512, __m512),
    dy: f32,
    isum: __m512i,
    corr: __m512i,
    acc: __m512,
) -> __m512 {
    let dy = _mm512_set1_ps(dy);
    if S::MINS {
        let acc = _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(isum), acc);
        _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dy), _mm512_cvtepi32_ps(corr), acc)
    } else {
        _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(isum), acc)
    }
}

/// The 8 registers of a sub-block stored as nibble lines (both groups' `l0`, `l1`): register
/// `m` the low nibbles of line `m % 4` (`m < 4`), register `m` the high ones (`m >= 4`).
#[inline]
pub(crate) unsafe fn nibble_registers(l0: &[Line32], l1: &[Line32]) -> [__m512i; 8] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m4 = _mm512_set1_epi8(15);
        each!(8, _mm512_setzero_si512(), |m| {
            let v = lines(&l0[m % 4], &l1[m % 4]);
            let v = if m < 4 { v } else { _mm512_srli_epi16(v, 4) };
            _mm512_and_si512(v, m4)
        })
    }
}

/// The 8 registers of a sub-block stored as 2-bit fields (both groups' `l0`, `l1`): register
/// `m` at bits `2 (m % 4)` of line `m / 4`.
#[inline]
pub(crate) unsafe fn crumb_registers(l0: &[Line32], l1: &[Line32]) -> [__m512i; 8] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m2 = _mm512_set1_epi8(3);
        let l = [lines(&l0[0], &l1[0]), lines(&l0[1], &l1[1])];
        each!(8, _mm512_setzero_si512(), |m| {
            let v = l[m / 4];
            let v = match m % 4 {
                0 => v,
                1 => _mm512_srli_epi16(v, 2),
                2 => _mm512_srli_epi16(v, 4),
                _ => _mm512_srli_epi16(v, 6),
            };
            _mm512_and_si512(v, m2)
        })
    }
}

/// Bit `m` of each byte of `h` at bit `to` (16-bit shifts; the mask keeps in-byte bits).
#[inline]
pub(crate) unsafe fn bit_to(h: __m512i, m: usize, to: usize) -> __m512i {
    let v = match to as i32 - m as i32 {
        4 => _mm512_slli_epi16(h, 4),
        3 => _mm512_slli_epi16(h, 3),
        2 => _mm512_slli_epi16(h, 2),
        1 => _mm512_slli_epi16(h, 1),
        0 => h,
        -1 => _mm512_srli_epi16(h, 1),
        -2 => _mm512_srli_epi16(h, 2),
        -3 => _mm512_srli_epi16(h, 3),
        -4 => _mm512_srli_epi16(h, 4),
        -5 => _mm512_srli_epi16(h, 5),
        _ => _mm512_srli_epi16(h, 6),
    };
    _mm512_and_si512(v, _mm512_set1_epi8(1 << to))
}

/// `S` x8 groups `g`, `g + 1` × `T` tokens: `out[t][r]`, rows of `g` first.
///
/// # Safety
/// See the module docs.
pub(crate) unsafe fn pair<S: KQuantAvx512, const T: usize>(
    w: &Grouped<S>,
    g: usize,
    a: [&[BlockQ8K]; T],
    sides: [&[Q8KSide]; T],
) -> [[f32; PAIR]; T] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
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
                let q = S::registers(x0, x1, j);
                if S::SUB == 32 {
                    let sc = S::scales(x0, x1, j);
                    for t in 0..T {
                        let mut s = _mm512_setzero_si512();
                        for (k, q) in q.iter().enumerate() {
                            s = _mm512_dpbusd_epi32(s, *q, bcast4(y[t].add(4 * (8 * j + k))));
                        }
                        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc));
                    }
                } else {
                    let (sa, sb) = (S::scales(x0, x1, 2 * j), S::scales(x0, x1, 2 * j + 1));
                    for t in 0..T {
                        let (mut s0, mut s1) = (_mm512_setzero_si512(), _mm512_setzero_si512());
                        for k in 0..4 {
                            s0 = _mm512_dpbusd_epi32(s0, q[k], bcast4(y[t].add(4 * (8 * j + k))));
                            s1 = _mm512_dpbusd_epi32(s1, q[k + 4], bcast4(y[t].add(4 * (8 * j + k + 4))));
                        }
                        let s = _mm512_add_epi32(_mm512_mullo_epi32(s0, sa), _mm512_mullo_epi32(s1, sb));
                        isum[t] = _mm512_add_epi32(isum[t], s);
                    }
                }
            }
            let coef = coef_pairs(x0, x1);
            let ds = (rows_f32(x0.d(), x1.d()), rows_f32(x0.dmin(), x1.dmin()));
            for t in 0..T {
                let yt = a[t].get_unchecked(b);
                let corr = corrections::<S>(&coef, &yt.bsums, sides[t].get_unchecked(b));
                let isum = if S::MINS {
                    isum[t]
                } else {
                    _mm512_sub_epi32(isum[t], _mm512_mullo_epi32(corr, _mm512_set1_epi32(S::OFFSET_AVX512)))
                };
                acc[t] = finish::<S>(ds, yt.d, isum, corr, acc[t]);
            }
        }
        rows_out(&acc)
    }
}
}
