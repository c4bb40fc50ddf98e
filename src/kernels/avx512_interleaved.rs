//! AVX-512 VNNI kernels over [`super::interleaved`] layouts: two 8-row groups (16 rows) × `T`
//! tokens per call (Q5_0, Q8_0, Q4_K, Q6_K).
//!
//! A 512-bit register holds the same 4-quant column of both groups (lanes 0..8: group `g`,
//! 8..16: group `g + 1`), so one `vpdpbusd` with the 4 activation bytes broadcast from memory
//! does 64 multiply-adds, summed straight into i32 lanes: no `vpmaddubsw` / `vpaddw` /
//! `vpmaddwd` chain. Measured here: 234-248 GMAC/s per core for that instruction against
//! 103-110 for the AVX2 chain. The K-quants' per-sub-block scales are applied with one
//! `vpmulld` per (sub-block or chunk, token).
//!
//! Per (row, token) the integer sums are exactly those of [`super::avx2_interleaved`] and the
//! f32 steps are the same, so the two paths agree bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` here requires AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C
//! ([`super::avx512::detected`]), groups `g` and `g + 1` to exist, activations from the
//! crate's quantizers and `a`/`sides` with at least `w.nb` entries per token.

use std::arch::x86_64::*;

use half::f16;

use super::avx512::{load2x256, tf};
use super::interleaved::{
    prefetch_part, BlockQ4Kx8, BlockQ6Kx8, Grouped, Line32, Q5_0x8, Q8KSide, Q8Side, Q8_0x8, GROUP,
};
use crate::quant::blocks::{BlockQ8K, BlockQ8_0};

/// Rows per call: two groups.
pub(crate) const PAIR: usize = 2 * GROUP;

tf! {
/// The same line of both groups.
#[inline]
pub(super) unsafe fn lines(a: &Line32, b: &Line32) -> __m512i {
    load2x256(a.0.as_ptr(), b.0.as_ptr())
}

/// 4 bytes at `p`, in every 32-bit lane (an embedded broadcast of `vpdpbusd`'s operand).
#[inline]
unsafe fn bcast4(p: *const i8) -> __m512i {
    _mm512_set1_epi32((p as *const i32).read_unaligned())
}

/// Both groups' row scales as 16 f32.
#[inline]
pub(super) unsafe fn rows_f32(a: &[f16; GROUP], b: &[f16; GROUP]) -> __m512 {
    let h = _mm256_set_m128i(
        _mm_loadu_si128(b.as_ptr() as *const __m128i),
        _mm_loadu_si128(a.as_ptr() as *const __m128i),
    );
    _mm512_cvtph_ps(h)
}

/// Both groups' 8 bytes, one per 32-bit lane (`u8` zero-extended).
#[inline]
pub(super) unsafe fn rows_u8(a: &[u8; GROUP], b: &[u8; GROUP]) -> __m512i {
    _mm512_cvtepu8_epi32(_mm_set_epi64x(
        (b.as_ptr() as *const i64).read_unaligned(),
        (a.as_ptr() as *const i64).read_unaligned(),
    ))
}

/// [`rows_u8`] for signed bytes.
#[inline]
pub(super) unsafe fn rows_i8(a: &[i8; GROUP], b: &[i8; GROUP]) -> __m512i {
    _mm512_cvtepi8_epi32(_mm_set_epi64x(
        (b.as_ptr() as *const i64).read_unaligned(),
        (a.as_ptr() as *const i64).read_unaligned(),
    ))
}

/// Per 32-bit lane `r` of 16 rows the i16 pair `(x[r], y[r])` for `vpmaddwd`, from each
/// group's bytes, read as `i8` when `signed`, else `u8`.
#[inline]
pub(super) unsafe fn row_pairs(
    x: (&[u8; GROUP], &[u8; GROUP]),
    y: (&[u8; GROUP], &[u8; GROUP]),
    signed: bool,
) -> __m512i {
    let ld = |v: &[u8; GROUP]| (v.as_ptr() as *const i64).read_unaligned();
    let xs = _mm_set_epi64x(ld(x.1), ld(x.0));
    let ys = _mm_set_epi64x(ld(y.1), ld(y.0));
    let lo = _mm_unpacklo_epi8(xs, ys);
    let hi = _mm_unpackhi_epi8(xs, ys);
    let both = _mm256_set_m128i(hi, lo);
    if signed {
        _mm512_cvtepi8_epi16(both)
    } else {
        _mm512_cvtepu8_epi16(both)
    }
}

/// Each token's 16 row sums out of its accumulator.
#[inline]
unsafe fn rows_out<const T: usize>(acc: &[__m512; T]) -> [[f32; PAIR]; T] {
    let mut out = [[0f32; PAIR]; T];
    for t in 0..T {
        _mm512_storeu_ps(out[t].as_mut_ptr(), acc[t]);
    }
    out
}

/// Blocks `x0` and `x1` (indices into `w`'s blocks) as 8 registers of unsigned 5-bit quants:
/// register `k` holds quants `4k..4k + 4` of each row (rows of `x0` in lanes 0..8).
#[inline]
pub(super) unsafe fn q5_0_registers(w: &Q5_0x8, x0: usize, x1: usize) -> [__m512i; 8] {
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

/// Both groups' Q4_K mins as i16 pairs `(m[2i][r], m[2i + 1][r])` per 32-bit lane, for
/// [`q4_k_min_sums`].
#[inline]
pub(super) unsafe fn q4_k_min_pairs(x0: &BlockQ4Kx8, x1: &BlockQ4Kx8) -> [__m512i; 4] {
    each!(4, _mm512_setzero_si512(), |i| row_pairs(
        (&x0.mins[2 * i], &x1.mins[2 * i]),
        (&x0.mins[2 * i + 1], &x1.mins[2 * i + 1]),
        false,
    ))
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
