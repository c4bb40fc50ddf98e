//! AVX2 + FMA + F16C kernels (same contracts as [`super::scalar`]).
//!
//! # Safety
//! Every `pub unsafe fn` here requires a CPU with AVX2, FMA and F16C ([`detected`]).
//! Activations must come from the crate's quantizers (quants in -127..=127): the
//! `maddubs` sign trick used for Q5_0/Q8_0 weights is exact only then.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::scalar;
use crate::quant::blocks::*;

/// Whether this CPU can run the kernels in this module.
pub fn detected() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f16_to_f32(h: f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.to_bits() as i32)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load128(p: *const u8) -> __m128i {
    _mm_loadu_si128(p as *const __m128i)
}

/// Half `h` (0 or 1) of a Q6_K block as four vectors of 32 unsigned 6-bit quants (0..64),
/// in activation order: elements 128h + 32k .. 128h + 32k + 32 for k = 0..4.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q6k_unpack_half(x: &BlockQ6K, h: usize) -> [__m256i; 4] {
    let m4 = _mm256_set1_epi8(0x0f);
    let m30 = _mm256_set1_epi8(0x30);
    let ql0 = load256(x.ql.as_ptr().add(64 * h));
    let ql1 = load256(x.ql.as_ptr().add(64 * h + 32));
    let qh = load256(x.qh.as_ptr().add(32 * h));
    [
        _mm256_or_si256(
            _mm256_and_si256(ql0, m4),
            _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(ql1, m4),
            _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
            _mm256_and_si256(qh, m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
            _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30),
        ),
    ]
}

/// 16 packed nibbles -> 32 bytes: low nibbles in the low lane, high nibbles in the high lane
/// (the Q4_0/Q5_0 element order).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibbles32(p: *const u8) -> __m256i {
    let q = load128(p);
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(q, 4), q),
        _mm256_set1_epi8(0x0f),
    )
}

/// Bit j of `bits` -> byte j = 0xff or 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bytes_from_bits(bits: u32) -> __m256i {
    let v = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_setr_epi64x(
            0,
            0x0101010101010101,
            0x0202020202020202,
            0x0303030303030303,
        ),
    );
    // Set every bit except the one this byte tests; the byte is all-ones iff that bit is set.
    let v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1))
}

/// Sum over 32 bytes of u8 `q` * i8 `a` minus `off * sum(a)`, as 8 i32 partial sums.
/// Exact: |pair sums| <= 2 * 63 * 127 fits i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_u8_offset(q: __m256i, a: __m256i, off: __m256i) -> __m256i {
    let p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(off, a));
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// Q4_0 weights × Q8_0 activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_0_q8_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let n = w.len().min(a.len());
    let off = _mm256_set1_epi8(8);
    let mut acc = [_mm256_setzero_ps(); 2];
    for i in 0..n {
        let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
        let d = _mm256_set1_ps(f16_to_f32(x.d) * f16_to_f32(y.d));
        let p = dot_u8_offset(nibbles32(x.qs.as_ptr()), load256(y.qs.as_ptr() as _), off);
        acc[i & 1] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[i & 1]);
    }
    hsum_ps(_mm256_add_ps(acc[0], acc[1]))
}

/// `d_w * d_a` of a block pair: both f16 scales converted by one instruction.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn d_product(dw: f16, da: f16) -> __m256 {
    let h = dw.to_bits() as u32 | (da.to_bits() as u32) << 16;
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(h as i32));
    _mm256_broadcastss_ps(_mm_mul_ss(v, _mm_movehdup_ps(v)))
}

/// Sum over 32 signed bytes of `q * a` as 8 i32 partial sums, via |q| * (a with q's sign)
/// (maddubs needs an unsigned operand). Exact for |q| <= 128, |a| <= 127.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_i8(q: __m256i, a: __m256i) -> __m256i {
    let p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// Q5_0 quants minus 16 as signed bytes: `nibble | 0xf0` where the 5th bit is clear.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5_0_signed(x: &BlockQ5_0) -> __m256i {
    let hi = _mm256_andnot_si256(
        bytes_from_bits(u32::from_le_bytes(x.qh)),
        _mm256_set1_epi8(0xf0u8 as i8),
    );
    _mm256_or_si256(nibbles32(x.qs.as_ptr()), hi)
}

/// Dot of 32-element block rows whose weights unpack to signed bytes (`unpack`), four
/// blocks per iteration into independent f32 accumulators, one horizontal sum per call.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q8_family<B>(w: &[B], a: &[BlockQ8_0], unpack: impl Fn(&B) -> (__m256i, f16)) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 4 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let (x, y) = (w.get_unchecked(i + k), a.get_unchecked(i + k));
            let (q, d) = unpack(x);
            let p = dot_i8(q, load256(y.qs.as_ptr() as _));
            *s = _mm256_fmadd_ps(d_product(d, y.d), _mm256_cvtepi32_ps(p), *s);
        }
        i += 4;
    }
    for j in i..n {
        let (x, y) = (w.get_unchecked(j), a.get_unchecked(j));
        let (q, d) = unpack(x);
        let p = dot_i8(q, load256(y.qs.as_ptr() as _));
        acc[j - i] = _mm256_fmadd_ps(d_product(d, y.d), _mm256_cvtepi32_ps(p), acc[j - i]);
    }
    hsum_ps(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ))
}

/// Q5_0 weights × Q8_0 activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_0_q8_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: this function's target features are enabled for the inlined closure.
    dot_q8_family(w, a, |x| unsafe { (q5_0_signed(x), x.d) })
}

/// Q8_0 weights × Q8_0 activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q8_0_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: as above.
    dot_q8_family(w, a, |x| unsafe { (load256(x.qs.as_ptr() as _), x.d) })
}

/// Broadcasts of each Q4_K/Q5_K sub-block scale to 16 i16 lanes, from the 8 scale bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn k4_scale_vectors(sc: [u8; 8]) -> [__m256i; 8] {
    let v = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(
        u64::from_le_bytes(sc) as i64,
    )));
    let mut out = [_mm256_setzero_si256(); 8];
    for (j, o) in out.iter_mut().enumerate() {
        let b = (2 * j) as i8;
        *o = _mm256_shuffle_epi8(
            v,
            _mm256_set1_epi16(i16::from_le_bytes([b as u8, b as u8 + 1])),
        );
    }
    out
}

/// The minimum correction `sum_j m[j/2] * bsums[j]` of Q4_K/Q5_K, as 8 i32 partial sums.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k4_min_products(m: [u8; 8], bsums: &[i16; 16]) -> __m256i {
    let m8 = _mm_cvtsi64_si128(u64::from_le_bytes(m) as i64);
    let m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    _mm256_madd_epi16(load256(bsums.as_ptr() as _), m16)
}

/// Q4_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_k_q8_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let n = w.len().min(a.len());
    let m4 = _mm256_set1_epi8(0x0f);
    let mut acc = _mm256_setzero_ps();
    let mut accm = _mm256_setzero_ps();
    for i in 0..n {
        let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
        let (sc, m) = scalar::unpack_k4_scales(&x.scales);
        let mins = k4_min_products(m, &y.bsums);
        accm = _mm256_fmadd_ps(
            _mm256_set1_ps(f16_to_f32(x.dmin) * y.d),
            _mm256_cvtepi32_ps(mins),
            accm,
        );
        let scv = k4_scale_vectors(sc);
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            let q = load256(x.qs.as_ptr().add(32 * j));
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            let plo = _mm256_maddubs_epi16(lo, load256(y.qs.as_ptr().add(64 * j) as _));
            let phi = _mm256_maddubs_epi16(hi, load256(y.qs.as_ptr().add(64 * j + 32) as _));
            let plo = _mm256_madd_epi16(plo, scv[2 * j]);
            let phi = _mm256_madd_epi16(phi, scv[2 * j + 1]);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
        }
        let d = _mm256_set1_ps(f16_to_f32(x.d) * y.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(_mm256_sub_ps(acc, accm))
}

/// Q5_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_k_q8_k(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let n = w.len().min(a.len());
    let m4 = _mm256_set1_epi8(0x0f);
    let b16 = _mm256_set1_epi8(16);
    let mut acc = _mm256_setzero_ps();
    let mut accm = _mm256_setzero_ps();
    for i in 0..n {
        let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
        let (sc, m) = scalar::unpack_k4_scales(&x.scales);
        let mins = k4_min_products(m, &y.bsums);
        accm = _mm256_fmadd_ps(
            _mm256_set1_ps(f16_to_f32(x.dmin) * y.d),
            _mm256_cvtepi32_ps(mins),
            accm,
        );
        let scv = k4_scale_vectors(sc);
        let qh = load256(x.qh.as_ptr());
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            let q = load256(x.qs.as_ptr().add(32 * j));
            // Bit 2j of qh is the 5th bit of the low nibbles, bit 2j+1 of the high ones.
            let bl = _mm256_set1_epi8((1u8 << (2 * j)) as i8);
            let bh = _mm256_set1_epi8((1u8 << (2 * j + 1)) as i8);
            let hl = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b16);
            let hh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b16);
            let lo = _mm256_or_si256(_mm256_and_si256(q, m4), hl);
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh);
            let plo = _mm256_maddubs_epi16(lo, load256(y.qs.as_ptr().add(64 * j) as _));
            let phi = _mm256_maddubs_epi16(hi, load256(y.qs.as_ptr().add(64 * j + 32) as _));
            let plo = _mm256_madd_epi16(plo, scv[2 * j]);
            let phi = _mm256_madd_epi16(phi, scv[2 * j + 1]);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
        }
        let d = _mm256_set1_ps(f16_to_f32(x.d) * y.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(_mm256_sub_ps(acc, accm))
}

/// Q6_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q6_k_q8_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let n = w.len().min(a.len());
    // Per 128-bit lane, broadcast i16 element 0 (low lane) or 1 (high lane) of a dword.
    let pick = _mm256_setr_epi8(
        0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, //
        2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
    );
    let mut acc = _mm256_setzero_ps();
    for i in 0..n {
        let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
        let sc16 = _mm256_cvtepi8_epi16(load128(x.scales.as_ptr() as _));
        // q - 32 is applied afterwards as -32 * sum(scale * bsum).
        let corr = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), sc16);
        let mut sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
        for h in 0..2 {
            let q = q6k_unpack_half(x, h);
            for (k, &qk) in q.iter().enumerate() {
                let p = _mm256_maddubs_epi16(qk, load256(y.qs.as_ptr().add(128 * h + 32 * k) as _));
                // Scales of groups 8h+2k (low lane) and 8h+2k+1 (high lane).
                let pair = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32((4 * h + k) as i32));
                let s = _mm256_shuffle_epi8(pair, pick);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
            }
        }
        let d = _mm256_set1_ps(f16_to_f32(x.d) * y.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(acc)
}

/// F16 weights × F16 activations (f32 products and sums).
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_f16_f16(w: &[f16], a: &[f16]) -> f32 {
    let n = w.len().min(a.len());
    let (pw, pa) = (w.as_ptr() as *const u8, a.as_ptr() as *const u8);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 8 * k);
            let x = _mm256_cvtph_ps(load128(pw.add(o)));
            let y = _mm256_cvtph_ps(load128(pa.add(o)));
            *s = _mm256_fmadd_ps(x, y, *s);
        }
        i += 32;
    }
    while i + 8 <= n {
        let x = _mm256_cvtph_ps(load128(pw.add(2 * i)));
        let y = _mm256_cvtph_ps(load128(pa.add(2 * i)));
        acc[0] = _mm256_fmadd_ps(x, y, acc[0]);
        i += 8;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum_ps(s);
    for j in i..n {
        sum += f16_to_f32(w[j]) * f16_to_f32(a[j]);
    }
    sum
}

/// 8 bf16 values widened to f32 (each the top half of its f32).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bf16x8(p: *const u8) -> __m256 {
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16))
}

/// BF16 weights × BF16 activations (f32 products and sums).
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_bf16_bf16(w: &[bf16], a: &[bf16]) -> f32 {
    let n = w.len().min(a.len());
    let (pw, pa) = (w.as_ptr() as *const u8, a.as_ptr() as *const u8);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 8 * k);
            *s = _mm256_fmadd_ps(bf16x8(pw.add(o)), bf16x8(pa.add(o)), *s);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(bf16x8(pw.add(2 * i)), bf16x8(pa.add(2 * i)), acc[0]);
        i += 8;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum_ps(s);
    for j in i..n {
        sum += w[j].to_f32() * a[j].to_f32();
    }
    sum
}

/// F32 × F32.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_f32_f32(w: &[f32], a: &[f32]) -> f32 {
    let n = w.len().min(a.len());
    let (pw, pa) = (w.as_ptr(), a.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let o = i + 8 * k;
            *s = _mm256_fmadd_ps(_mm256_loadu_ps(pw.add(o)), _mm256_loadu_ps(pa.add(o)), *s);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(
            _mm256_loadu_ps(pw.add(i)),
            _mm256_loadu_ps(pa.add(i)),
            acc[0],
        );
        i += 8;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum_ps(s);
    for j in i..n {
        sum += w[j] * a[j];
    }
    sum
}

/// [`scalar::f32_dots`] for `G <= 4` queries, two rows at a time: each 8-float slice of a
/// query is loaded once for both rows, and each row slice once for all `G` queries.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_dots_g<const G: usize>(q: &[f32], rows: &[f32], out: &mut [f32], stride: usize) {
    let d = q.len() / G;
    let n = rows.len() / d.max(1);
    let mut j = 0;
    while j + 2 <= n {
        dots_rows::<G, 2>(q, d, &rows[j * d..(j + 2) * d], out, stride, j);
        j += 2;
    }
    if j < n {
        dots_rows::<G, 1>(q, d, &rows[j * d..(j + 1) * d], out, stride, j);
    }
}

/// `R` rows (starting at row `j0`) of [`f32_dots_g`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dots_rows<const G: usize, const R: usize>(
    q: &[f32],
    d: usize,
    rows: &[f32],
    out: &mut [f32],
    stride: usize,
    j0: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); G]; R];
    let mut i = 0;
    while i + 8 <= d {
        let v = each!(R, _mm256_setzero_ps(), |r| _mm256_loadu_ps(
            rows.as_ptr().add(r * d + i)
        ));
        for g in 0..G {
            let qv = _mm256_loadu_ps(q.as_ptr().add(g * d + i));
            for (acc, v) in acc.iter_mut().zip(&v) {
                acc[g] = _mm256_fmadd_ps(qv, *v, acc[g]);
            }
        }
        i += 8;
    }
    for (r, acc) in acc.iter().enumerate() {
        let row = &rows[r * d..(r + 1) * d];
        for (g, a) in acc.iter().enumerate() {
            let qg = &q[g * d..(g + 1) * d];
            let tail: f32 = qg[i..].iter().zip(&row[i..]).map(|(x, y)| x * y).sum();
            out[g * stride + j0 + r] = hsum_ps(*a) + tail;
        }
    }
}

/// [`scalar::f32_weighted_sum`] for `G <= 4` accumulators: each row's slice of `8 S` floats is
/// loaded once for all of them, and the `G · S` accumulator registers stay live over all rows.
/// Whole cache lines per pass matter: rows are often 1 KiB apart, so a pass touching half a
/// line per row would fetch every line twice through a few L1 sets. Bit-identical to the
/// scalar version (each element still adds the rows in order with one fused multiply-add).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_weighted_sum_g<const G: usize>(
    acc: &mut [f32],
    rows: &[f32],
    w: &[f32],
    stride: usize,
) {
    weighted_sum_columns::<G>(acc, rows, w, stride, 0)
}

/// Columns `[i, d)` of [`f32_weighted_sum_g`] (the AVX-512 version does the ones before).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weighted_sum_columns<const G: usize>(
    acc: &mut [f32],
    rows: &[f32],
    w: &[f32],
    stride: usize,
    mut i: usize,
) {
    let d = acc.len() / G;
    // Enough independent accumulators to cover the FMA latency.
    match G {
        1 | 2 => weighted_pass::<G, 4>(acc, d, rows, w, stride, &mut i),
        _ => weighted_pass::<G, 2>(acc, d, rows, w, stride, &mut i),
    }
    weighted_pass::<G, 1>(acc, d, rows, w, stride, &mut i);
    if i == d {
        return;
    }
    let n = rows.len() / d.max(1);
    for g in 0..G {
        for j in 0..n {
            let (wj, r) = (w[g * stride + j], &rows[j * d..(j + 1) * d]);
            for (a, x) in acc[g * d + i..(g + 1) * d].iter_mut().zip(&r[i..]) {
                *a = x.mul_add(wj, *a);
            }
        }
    }
}

/// Columns `[*i, ..)` of [`f32_weighted_sum_g`] in passes of `8 S` floats while whole passes
/// fit; advances `*i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weighted_pass<const G: usize, const S: usize>(
    acc: &mut [f32],
    d: usize,
    rows: &[f32],
    w: &[f32],
    stride: usize,
    i: &mut usize,
) {
    let n = rows.len() / d.max(1);
    let p = acc.as_mut_ptr();
    while *i + 8 * S <= d {
        let c = *i;
        let mut a = each!(G, [_mm256_setzero_ps(); S], |g| each!(
            S,
            _mm256_setzero_ps(),
            |s| _mm256_loadu_ps(p.add(g * d + c + 8 * s))
        ));
        for j in 0..n {
            let r = rows.as_ptr().add(j * d + c);
            let v = each!(S, _mm256_setzero_ps(), |s| _mm256_loadu_ps(r.add(8 * s)));
            for (g, a) in a.iter_mut().enumerate() {
                let wj = _mm256_set1_ps(*w.get_unchecked(g * stride + j));
                for (a, v) in a.iter_mut().zip(&v) {
                    *a = _mm256_fmadd_ps(wj, *v, *a);
                }
            }
        }
        for (g, a) in a.iter().enumerate() {
            for (s, a) in a.iter().enumerate() {
                _mm256_storeu_ps(p.add(g * d + c + 8 * s), *a);
            }
        }
        *i += 8 * S;
    }
}

/// Up to 4 queries per call of the `G`-wide kernels (their accumulators stay in registers).
macro_rules! by_group {
    ($f:ident, $g:expr, $($arg:expr),*) => {
        match $g {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            _ => $f::<4>($($arg),*),
        }
    };
}

/// [`scalar::f32_dots`] four queries at a time.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f32_dots(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    let n_q = q.len() / d.max(1);
    for g0 in (0..n_q).step_by(4) {
        let g = (n_q - g0).min(4);
        let (q, out) = (&q[g0 * d..(g0 + g) * d], &mut out[g0 * stride..]);
        by_group!(f32_dots_g, g, q, rows, out, stride);
    }
}

/// [`scalar::f32_weighted_sum`] four accumulators at a time; bit-identical to it.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f32_weighted_sum(acc: &mut [f32], d: usize, rows: &[f32], w: &[f32], stride: usize) {
    let n_acc = acc.len() / d.max(1);
    for g0 in (0..n_acc).step_by(4) {
        let g = (n_acc - g0).min(4);
        let (acc, w) = (&mut acc[g0 * d..(g0 + g) * d], &w[g0 * stride..]);
        by_group!(f32_weighted_sum_g, g, acc, rows, w, stride);
    }
}

/// [`scalar::f16_mad`] eight lanes at a time (F16C conversions, FMA); bit-identical to it.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_mad(acc: &mut [f16], v: &[f16], w: f32) {
    let n = acc.len().min(v.len());
    let wv = _mm256_set1_ps(w);
    let mut i = 0;
    while i + 8 <= n {
        let pa = acc.as_mut_ptr().add(i) as *mut __m128i;
        let a = _mm256_cvtph_ps(_mm_loadu_si128(pa));
        let x = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i) as *const __m128i));
        _mm_storeu_si128(
            pa,
            _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_fmadd_ps(x, wv, a)),
        );
        i += 8;
    }
    scalar::f16_mad(&mut acc[i..n], &v[i..n], w);
}

/// [`scalar::f16_dot`] eight lanes at a time (multiply, then add: no FMA); bit-identical to it.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_dot(q: &[f32], k: &[f16]) -> f32 {
    let n = q.len().min(k.len());
    let body = n / 8 * 8;
    let mut acc = _mm256_setzero_ps();
    for i in (0..body).step_by(8) {
        let kv = _mm256_cvtph_ps(_mm_loadu_si128(k.as_ptr().add(i) as *const __m128i));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q.as_ptr().add(i)), kv));
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    let sum = lanes.iter().sum::<f32>();
    if body == n {
        sum
    } else {
        sum + scalar::f16_dot(&q[body..n], &k[body..n])
    }
}

/// [`scalar::f16_row_to_f32`] eight lanes at a time (F16C); bit-identical to it.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_row_to_f32(src: &[f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len()) / 8 * 8;
    for i in (0..n).step_by(8) {
        let h = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
        _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
    }
    scalar::f16_row_to_f32(&src[n..], &mut dst[n..]);
}

/// [`scalar::f16_scale`] eight lanes at a time; bit-identical to it.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_scale(acc: &mut [f16], s: f32) {
    let sv = _mm256_set1_ps(s);
    let mut chunks = acc.chunks_exact_mut(8);
    for c in &mut chunks {
        let p = c.as_mut_ptr() as *mut __m128i;
        let a = _mm256_cvtph_ps(_mm_loadu_si128(p));
        _mm_storeu_si128(
            p,
            _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(a, sv)),
        );
    }
    scalar::f16_scale(chunks.into_remainder(), s);
}
