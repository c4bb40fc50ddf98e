//! AVX2 kernels over [`super::interleaved`] layouts: 8 rows × `T` tokens per call (Q5_0, Q8_0,
//! Q4_K, Q6_K).
//!
//! Per block and register: one broadcast of 4 activation bytes, one `vpmaddubsw` for 8 rows;
//! four registers' i16 pair sums are added before one `vpmaddwd` (Q5_0: 4 · 2 · 31 · 127 <
//! 2^15, exact), and the scale conversion and multiply-add happen once per 8 rows. The block's
//! unpacked quants are reused for every token.
//!
//! # Safety
//! Every `pub unsafe fn` here requires AVX2, FMA and F16C ([`super::avx2::detected`]),
//! activations from the crate's quantizers and `a`/`sides` with at least `w.nb` entries per
//! token.

use std::arch::x86_64::*;

use half::f16;

use super::interleaved::{BlockQ4Kx8, BlockQ6Kx8, Grouped, Line32, Q5_0x8, Q8Side, Q8_0x8, GROUP};
use crate::quant::blocks::{BlockQ8K, BlockQ8_0};

/// Activation bytes `4k..4k+4` of a block, in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast4(y: &BlockQ8_0, k: usize) -> __m256i {
    _mm256_set1_epi32((y.qs.as_ptr().add(4 * k) as *const i32).read_unaligned())
}

/// Each token's 8 row sums out of its accumulator.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_out<const T: usize>(acc: &[__m256; T]) -> [[f32; GROUP]; T] {
    let mut out = [[0f32; GROUP]; T];
    for t in 0..T {
        _mm256_storeu_ps(out[t].as_mut_ptr(), acc[t]);
    }
    out
}

/// The 8 unpacked registers of Q5_0x8 block `gb` (quants 0..=31).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_q5_0x8(w: &Q5_0x8, gb: usize) -> [__m256i; 8] {
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

/// Q8_0x8 rows of group `g` × `T` tokens: `out[t][r]`. Each product is |w| · sign(a, w)
/// (`vpmaddubsw` needs one unsigned side); pair sums reach 2 · 128 · 127, so every register
/// goes through `vpmaddwd` on its own.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q8_0x8_group<const T: usize>(
    w: &Q8_0x8,
    g: usize,
    a: [&[BlockQ8_0]; T],
    sides: [&[Q8Side]; T],
) -> [[f32; GROUP]; T] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    for b in 0..w.nb {
        let gb = g * w.nb + b;
        w.prefetch_block(gb);
        let p = w.qs.as_ptr().add(gb * 8) as *const __m256i;
        let q = each!(8, _mm256_setzero_si256(), |k| _mm256_load_si256(p.add(k)));
        let aq = each!(8, _mm256_setzero_si256(), |k| _mm256_abs_epi8(q[k]));
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(w.d.as_ptr().add(gb) as *const __m128i));
        for t in 0..T {
            let y = a[t].get_unchecked(b);
            let p = |k: usize| {
                let s = _mm256_sign_epi8(bcast4(y, k), q[k]);
                _mm256_madd_epi16(_mm256_maddubs_epi16(aq[k], s), ones)
            };
            let sumi = _mm256_add_epi32(
                _mm256_add_epi32(_mm256_add_epi32(p(0), p(1)), _mm256_add_epi32(p(2), p(3))),
                _mm256_add_epi32(_mm256_add_epi32(p(4), p(5)), _mm256_add_epi32(p(6), p(7))),
            );
            let dy = _mm256_set1_ps(sides[t].get_unchecked(b).d);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(sumi), acc[t]);
        }
    }
    rows_out(&acc)
}

/// Activation bytes `4k..4k+4` of a Q8_K block, in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast4_k(y: &BlockQ8K, k: usize) -> __m256i {
    _mm256_set1_epi32((y.qs.as_ptr().add(4 * k) as *const i32).read_unaligned())
}

/// Activation 16-quant sums `2c` and `2c + 1` as an i16 pair in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bsum_pair(y: &BlockQ8K, c: usize) -> __m256i {
    _mm256_set1_epi32((y.bsums.as_ptr().add(2 * c) as *const i32).read_unaligned())
}

/// Per-row bytes `[a0..a8]` and `[b0..b8]` as i16 pairs `(a_r, b_r)` for `vpmaddwd`: row `r`
/// owns lanes `2r` and `2r + 1`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pairs_u8(a: &[u8; GROUP], b: &[u8; GROUP]) -> __m256i {
    let (a, b) = (
        _mm_loadl_epi64(a.as_ptr() as *const __m128i),
        _mm_loadl_epi64(b.as_ptr() as *const __m128i),
    );
    _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b))
}

/// [`pairs_u8`] for signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pairs_i8(a: &[i8; GROUP], b: &[i8; GROUP]) -> __m256i {
    let (a, b) = (
        _mm_loadl_epi64(a.as_ptr() as *const __m128i),
        _mm_loadl_epi64(b.as_ptr() as *const __m128i),
    );
    _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b))
}

/// The 8 rows' f16 values as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_f32(v: &[f16; GROUP]) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr() as *const __m128i))
}

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
            let acc_t = _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(isum[t]), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dy), _mm256_cvtepi32_ps(summ), acc_t);
        }
    }
    rows_out(&acc)
}

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
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m4), top(h1, m0)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m4), top(h1, m1)),
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
