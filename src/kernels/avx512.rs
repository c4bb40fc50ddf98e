//! AVX-512 (F/BW/VL) + VNNI kernels (same contracts as [`super::scalar`]).
//!
//! The integer kernels feed unsigned weight codes to `vpdpbusd` (u8 × i8 → i32, no
//! saturation) and subtract the weight offset times the activation sum afterwards, which keeps
//! every result exact.
//!
//! # Safety
//! Every `pub unsafe fn` here requires a CPU with the features listed in [`detected`].

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::avx2::f16_to_f32;
use super::scalar;
use crate::quant::blocks::*;

/// Whether this CPU can run the kernels in this module.
pub fn detected() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
        && super::avx2::detected()
}

/// Compiles each item for this path's features ([`detected`]).
macro_rules! tf {
    ($($item:item)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        $item
    )*};
}
pub(super) use tf;

tf! {
#[inline]
unsafe fn load256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline]
unsafe fn load512(p: *const u8) -> __m512i {
    _mm512_loadu_si512(p as *const __m512i)
}

/// Two 32-byte runs as one vector.
#[inline]
pub(super) unsafe fn load2x256(p0: *const u8, p1: *const u8) -> __m512i {
    _mm512_inserti64x4(_mm512_castsi256_si512(load256(p0)), load256(p1), 1)
}

/// The nibbles of two Q4_0-style blocks in element order: [b0 lo, b0 hi, b1 lo, b1 hi].
#[inline]
unsafe fn nibbles2x32(p0: *const u8, p1: *const u8) -> __m512i {
    let q = _mm256_set_m128i(
        _mm_loadu_si128(p1 as *const __m128i),
        _mm_loadu_si128(p0 as *const __m128i),
    );
    let m4 = _mm256_set1_epi8(0x0f);
    let lo = _mm256_and_si256(q, m4);
    let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    let z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    // [b0 lo, b1 lo, b0 hi, b1 hi] -> lanes 0, 2, 1, 3.
    _mm512_shuffle_i64x2(z, z, 0b11_01_10_00)
}

/// `d_w * d_a` of two blocks, broadcast to the low and high 8 lanes.
#[inline]
unsafe fn scales2(dw0: f16, dw1: f16, da0: f16, da1: f16) -> __m512 {
    let h = _mm_set_epi16(
        0,
        0,
        0,
        0,
        da1.to_bits() as i16,
        da0.to_bits() as i16,
        dw1.to_bits() as i16,
        dw0.to_bits() as i16,
    );
    let f = _mm_cvtph_ps(h);
    let p = _mm_mul_ps(f, _mm_movehl_ps(f, f));
    let idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(p))
}

/// dot(q, a) - 2^SHIFT * sum(a) per 4-byte group, q unsigned.
#[inline]
unsafe fn dot_offset<const SHIFT: u32>(q: __m512i, a: __m512i) -> __m512i {
    let z = _mm512_setzero_si512();
    let dot = _mm512_dpbusd_epi32(z, q, a);
    let sa = _mm512_dpbusd_epi32(z, _mm512_set1_epi8(1), a);
    _mm512_sub_epi32(dot, _mm512_slli_epi32::<SHIFT>(sa))
}

/// Q4_0 weights × Q8_0 activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_q4_0_q8_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = _mm512_setzero_ps();
    let mut i = 0;
    while i + 2 <= n {
        let (x0, x1) = (w.get_unchecked(i), w.get_unchecked(i + 1));
        let (y0, y1) = (a.get_unchecked(i), a.get_unchecked(i + 1));
        let q = nibbles2x32(x0.qs.as_ptr(), x1.qs.as_ptr());
        let av = load2x256(y0.qs.as_ptr() as _, y1.qs.as_ptr() as _);
        let p = dot_offset::<3>(q, av);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scales2(x0.d, x1.d, y0.d, y1.d), acc);
        i += 2;
    }
    _mm512_reduce_add_ps(acc) + scalar::vec_dot_q4_0_q8_0(&w[i..n], &a[i..n])
}

/// Q5_0 weights × Q8_0 activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_q5_0_q8_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = _mm512_setzero_ps();
    let b16 = _mm512_set1_epi8(16);
    let mut i = 0;
    while i + 2 <= n {
        let (x0, x1) = (w.get_unchecked(i), w.get_unchecked(i + 1));
        let (y0, y1) = (a.get_unchecked(i), a.get_unchecked(i + 1));
        let q = nibbles2x32(x0.qs.as_ptr(), x1.qs.as_ptr());
        // Bit j of qh is the 5th bit of element j, and the elements are in order.
        let bits = u32::from_le_bytes(x0.qh) as u64 | (u32::from_le_bytes(x1.qh) as u64) << 32;
        let q = _mm512_or_si512(q, _mm512_maskz_mov_epi8(bits, b16));
        let av = load2x256(y0.qs.as_ptr() as _, y1.qs.as_ptr() as _);
        let p = dot_offset::<4>(q, av);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scales2(x0.d, x1.d, y0.d, y1.d), acc);
        i += 2;
    }
    _mm512_reduce_add_ps(acc) + scalar::vec_dot_q5_0_q8_0(&w[i..n], &a[i..n])
}

/// Q8_0 weights × Q8_0 activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_q8_0_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = _mm512_setzero_ps();
    let flip = _mm512_set1_epi8(-128);
    let mut i = 0;
    while i + 2 <= n {
        let (x0, x1) = (w.get_unchecked(i), w.get_unchecked(i + 1));
        let (y0, y1) = (a.get_unchecked(i), a.get_unchecked(i + 1));
        // x + 128 as u8, then subtract 128 * sum(a).
        let q = _mm512_xor_si512(load2x256(x0.qs.as_ptr() as _, x1.qs.as_ptr() as _), flip);
        let av = load2x256(y0.qs.as_ptr() as _, y1.qs.as_ptr() as _);
        let p = dot_offset::<7>(q, av);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scales2(x0.d, x1.d, y0.d, y1.d), acc);
        i += 2;
    }
    _mm512_reduce_add_ps(acc) + scalar::vec_dot_q8_0_q8_0(&w[i..n], &a[i..n])
}

/// The 8 Q4_K/Q5_K scales as i32 lanes 0..8, and the min correction
/// `sum_j m[j/2] * bsums[j]` as 8 i32 partial sums.
#[inline]
unsafe fn k4_prologue(scales: &[u8; 12], bsums: &[i16; 16]) -> (__m512i, __m256i) {
    let (sc, m) = scalar::unpack_k4_scales(scales);
    let scv = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(u64::from_le_bytes(sc) as i64));
    let m8 = _mm_cvtsi64_si128(u64::from_le_bytes(m) as i64);
    let m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    let mins = _mm256_madd_epi16(load256(bsums.as_ptr() as _), m16);
    (scv, mins)
}

/// Lane selector: scale 2j in the low 8 lanes, 2j+1 in the high 8.
#[inline]
unsafe fn pair_index(j: i32) -> __m512i {
    let (a, b) = (2 * j, 2 * j + 1);
    _mm512_set_epi32(b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a)
}

/// Q4_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_q4_k_q8_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let n = w.len().min(a.len());
    let m4 = _mm256_set1_epi8(0x0f);
    let zero = _mm512_setzero_si512();
    let mut acc = _mm512_setzero_ps();
    let mut accm = _mm256_setzero_ps();
    for i in 0..n {
        let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
        let (scv, mins) = k4_prologue(&x.scales, &y.bsums);
        let dmin = f16_to_f32(x.dmin) * y.d;
        accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), accm);
        let mut sumi = zero;
        for j in 0..4 {
            let q = load256(x.qs.as_ptr().add(32 * j));
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            let z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            let dot = _mm512_dpbusd_epi32(zero, z, load512(y.qs.as_ptr().add(64 * j) as _));
            let s = _mm512_permutexvar_epi32(pair_index(j as i32), scv);
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dot, s));
        }
        let d = f16_to_f32(x.d) * y.d;
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    }
    _mm512_reduce_add_ps(acc) - hsum256(accm)
}

#[inline]
unsafe fn hsum256(v: __m256) -> f32 {
    _mm512_reduce_add_ps(_mm512_zextps256_ps512(v))
}

/// Q5_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_q5_k_q8_k(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let n = w.len().min(a.len());
    let m4 = _mm256_set1_epi8(0x0f);
    let b16 = _mm512_set1_epi8(16);
    let zero = _mm512_setzero_si512();
    let mut acc = _mm512_setzero_ps();
    let mut accm = _mm256_setzero_ps();
    for i in 0..n {
        let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
        let (scv, mins) = k4_prologue(&x.scales, &y.bsums);
        let dmin = f16_to_f32(x.dmin) * y.d;
        accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), accm);
        let qh = _mm512_broadcast_i64x4(load256(x.qh.as_ptr()));
        let mut sumi = zero;
        for j in 0..4 {
            let q = load256(x.qs.as_ptr().add(32 * j));
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            let z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            // 5th bits: qh bit 2j for the low nibbles, bit 2j+1 for the high ones.
            let bits = _mm512_inserti64x4(
                _mm512_set1_epi8((1u8 << (2 * j)) as i8),
                _mm256_set1_epi8((1u8 << (2 * j + 1)) as i8),
                1,
            );
            let hm = _mm512_test_epi8_mask(qh, bits);
            let z = _mm512_or_si512(z, _mm512_maskz_mov_epi8(hm, b16));
            let dot = _mm512_dpbusd_epi32(zero, z, load512(y.qs.as_ptr().add(64 * j) as _));
            let s = _mm512_permutexvar_epi32(pair_index(j as i32), scv);
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dot, s));
        }
        let d = f16_to_f32(x.d) * y.d;
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    }
    _mm512_reduce_add_ps(acc) - hsum256(accm)
}

/// Q6_K weights × Q8_K activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_q6_k_q8_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let n = w.len().min(a.len());
    let m4 = _mm512_set1_epi8(0x0f);
    let m30 = _mm512_set1_epi8(0x30);
    let zero = _mm512_setzero_si512();
    // 16-bit shifts that bring qh bit pairs (0,1 | 2,3) and (4,5 | 6,7) to bits 4,5 of each
    // byte, for the first | second 32 elements of a vector.
    let sh_a = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    let sh_b = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    let mut acc = _mm512_setzero_ps();
    for i in 0..n {
        let (x, y) = (w.get_unchecked(i), a.get_unchecked(i));
        let sc8 = _mm_loadu_si128(x.scales.as_ptr() as *const __m128i);
        let scv = _mm512_cvtepi8_epi32(sc8);
        // q - 32 is applied as -32 * sum(scale * bsum).
        let corr = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), _mm256_cvtepi8_epi16(sc8));
        let mut sumi = _mm512_sub_epi32(zero, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
        for h in 0..2 {
            let ql = load512(x.ql.as_ptr().add(64 * h));
            let qh = _mm512_broadcast_i64x4(load256(x.qh.as_ptr().add(32 * h)));
            let q12 = _mm512_or_si512(
                _mm512_and_si512(ql, m4),
                _mm512_and_si512(_mm512_sllv_epi16(qh, sh_a), m30),
            );
            let q34 = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                _mm512_and_si512(_mm512_srlv_epi16(qh, sh_b), m30),
            );
            let d12 = _mm512_dpbusd_epi32(zero, q12, load512(y.qs.as_ptr().add(128 * h) as _));
            let d34 =
                _mm512_dpbusd_epi32(zero, q34, load512(y.qs.as_ptr().add(128 * h + 64) as _));
            // Four lanes per 16-element group; groups 8h..8h+4 and 8h+4..8h+8.
            let g = (8 * h) as i32;
            let i12 = _mm512_add_epi32(_mm512_set1_epi32(g), group_index());
            let i34 = _mm512_add_epi32(_mm512_set1_epi32(g + 4), group_index());
            sumi = _mm512_add_epi32(
                sumi,
                _mm512_mullo_epi32(d12, _mm512_permutexvar_epi32(i12, scv)),
            );
            sumi = _mm512_add_epi32(
                sumi,
                _mm512_mullo_epi32(d34, _mm512_permutexvar_epi32(i34, scv)),
            );
        }
        let d = f16_to_f32(x.d) * y.d;
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    }
    _mm512_reduce_add_ps(acc)
}

#[inline]
unsafe fn group_index() -> __m512i {
    _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
}

/// F16 weights × F16 activations (f32 products and sums).
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_f16_f16(w: &[f16], a: &[f16]) -> f32 {
    let n = w.len().min(a.len());
    let (pw, pa) = (w.as_ptr() as *const u8, a.as_ptr() as *const u8);
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 16 * k);
            let x = _mm512_cvtph_ps(load256(pw.add(o)));
            let y = _mm512_cvtph_ps(load256(pa.add(o)));
            *s = _mm512_fmadd_ps(x, y, *s);
        }
        i += 64;
    }
    while i + 16 <= n {
        let x = _mm512_cvtph_ps(load256(pw.add(2 * i)));
        let y = _mm512_cvtph_ps(load256(pa.add(2 * i)));
        acc[0] = _mm512_fmadd_ps(x, y, acc[0]);
        i += 16;
    }
    let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    let mut sum = _mm512_reduce_add_ps(s);
    for j in i..n {
        sum += f16_to_f32(w[j]) * f16_to_f32(a[j]);
    }
    sum
}

/// 16 bf16 values (u16 lanes) widened to f32: each the top half of its f32.
#[inline]
pub(super) unsafe fn bf16_widen16(h: __m256i) -> __m512 {
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
}

#[inline]
unsafe fn bf16x16(p: *const u8) -> __m512 {
    bf16_widen16(load256(p))
}

/// BF16 weights × BF16 activations (f32 products and sums).
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_bf16_bf16(w: &[bf16], a: &[bf16]) -> f32 {
    let n = w.len().min(a.len());
    let (pw, pa) = (w.as_ptr() as *const u8, a.as_ptr() as *const u8);
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 16 * k);
            *s = _mm512_fmadd_ps(bf16x16(pw.add(o)), bf16x16(pa.add(o)), *s);
        }
        i += 64;
    }
    while i + 16 <= n {
        acc[0] = _mm512_fmadd_ps(bf16x16(pw.add(2 * i)), bf16x16(pa.add(2 * i)), acc[0]);
        i += 16;
    }
    let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    let mut sum = _mm512_reduce_add_ps(s);
    for j in i..n {
        sum += w[j].to_f32() * a[j].to_f32();
    }
    sum
}

/// F32 × F32.
///
/// # Safety
/// See the module docs.
pub unsafe fn vec_dot_f32_f32(w: &[f32], a: &[f32]) -> f32 {
    let n = w.len().min(a.len());
    let (pw, pa) = (w.as_ptr(), a.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let o = i + 16 * k;
            *s = _mm512_fmadd_ps(_mm512_loadu_ps(pw.add(o)), _mm512_loadu_ps(pa.add(o)), *s);
        }
        i += 64;
    }
    while i + 16 <= n {
        acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(pw.add(i)), _mm512_loadu_ps(pa.add(i)), acc[0]);
        i += 16;
    }
    let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    let mut sum = _mm512_reduce_add_ps(s);
    for j in i..n {
        sum += w[j] * a[j];
    }
    sum
}
}

tf! {
/// [`scalar::f32_dots`] on 16 lanes: up to four queries against four rows per pass, each row
/// slice loaded once for all queries and each query slice once for all rows; a masked pass
/// takes the tail of `d`. Matches the scalar version within f32 rounding (its sums are f64).
///
/// # Safety
/// See the module docs.
pub unsafe fn f32_dots(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    let n_q = q.len() / d.max(1);
    for g0 in (0..n_q).step_by(4) {
        let g = (n_q - g0).min(4);
        let (q, out) = (&q[g0 * d..(g0 + g) * d], &mut out[g0 * stride..]);
        match g {
            1 => dots_g::<1>(q, d, rows, out, stride),
            2 => dots_g::<2>(q, d, rows, out, stride),
            3 => dots_g::<3>(q, d, rows, out, stride),
            _ => dots_g::<4>(q, d, rows, out, stride),
        }
    }
}

/// All rows against `G` queries: blocks of four rows, then single rows.
#[inline]
unsafe fn dots_g<const G: usize>(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    let n = rows.len() / d.max(1);
    let mut j = 0;
    while j + 4 <= n {
        dots_block::<G, 4>(q, d, rows, out, stride, j);
        j += 4;
    }
    for j in j..n {
        dots_block::<G, 1>(q, d, rows, out, stride, j);
    }
}

/// Rows `j0..j0 + R` against the `G` queries of [`f32_dots`].
#[inline]
unsafe fn dots_block<const G: usize, const R: usize>(
    q: &[f32],
    d: usize,
    rows: &[f32],
    out: &mut [f32],
    stride: usize,
    j0: usize,
) {
    let (pq, pr) = (q.as_ptr(), rows.as_ptr().add(j0 * d));
    let mut acc = [[_mm512_setzero_ps(); G]; R];
    let mut i = 0;
    let mut step = |i: usize, mask: __mmask16| {
        let v = each!(R, _mm512_setzero_ps(), |r| _mm512_maskz_loadu_ps(mask, pr.add(r * d + i)));
        for g in 0..G {
            let qv = _mm512_maskz_loadu_ps(mask, pq.add(g * d + i));
            for (acc, v) in acc.iter_mut().zip(&v) {
                acc[g] = _mm512_fmadd_ps(qv, *v, acc[g]);
            }
        }
    };
    while i + 16 <= d {
        step(i, !0);
        i += 16;
    }
    if i < d {
        step(i, (1u16 << (d - i)) - 1);
    }
    for g in 0..G {
        if R == 4 {
            let sums = hsum4(acc[0][g], acc[1][g], acc[2][g], acc[3][g]);
            _mm_storeu_ps(out.as_mut_ptr().add(g * stride + j0), sums);
        } else {
            for (r, acc) in acc.iter().enumerate() {
                out[g * stride + j0 + r] = _mm512_reduce_add_ps(acc[g]);
            }
        }
    }
}

/// `[Σa, Σb, Σc, Σd]`: the four horizontal sums at once.
#[inline]
unsafe fn hsum4(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
    let half = |v: __m512| {
        _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps::<1>(v))
    };
    let ab = _mm256_hadd_ps(half(a), half(b));
    let cd = _mm256_hadd_ps(half(c), half(d));
    let abcd = _mm256_hadd_ps(ab, cd);
    _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps::<1>(abcd))
}

/// [`scalar::f32_weighted_sum`] on 16 lanes, four accumulators at a time; bit-identical to it
/// (each element still adds the rows in order with one fused multiply-add). Columns short of
/// a 16-lane pass go to the AVX2 kernel.
///
/// # Safety
/// See the module docs.
pub unsafe fn f32_weighted_sum(acc: &mut [f32], d: usize, rows: &[f32], w: &[f32], stride: usize) {
    let n_acc = acc.len() / d.max(1);
    for g0 in (0..n_acc).step_by(4) {
        let g = (n_acc - g0).min(4);
        let (acc, w) = (&mut acc[g0 * d..(g0 + g) * d], &w[g0 * stride..]);
        match g {
            1 => weighted_sum_g::<1>(acc, rows, w, stride),
            2 => weighted_sum_g::<2>(acc, rows, w, stride),
            3 => weighted_sum_g::<3>(acc, rows, w, stride),
            _ => weighted_sum_g::<4>(acc, rows, w, stride),
        }
    }
}

/// `G` accumulators of [`f32_weighted_sum`]: passes of `16 S` columns with the `G · S`
/// accumulator registers live over all rows, as in the AVX2 kernel.
#[inline]
unsafe fn weighted_sum_g<const G: usize>(acc: &mut [f32], rows: &[f32], w: &[f32], stride: usize) {
    let mut i = 0;
    match G {
        1 | 2 => weighted_pass::<G, 4>(acc, rows, w, stride, &mut i),
        _ => weighted_pass::<G, 2>(acc, rows, w, stride, &mut i),
    }
    weighted_pass::<G, 1>(acc, rows, w, stride, &mut i);
    super::avx2::weighted_sum_columns::<G>(acc, rows, w, stride, i);
}

/// Columns `[*i, ..)` in passes of `16 S` floats while whole passes fit; advances `*i`.
#[inline]
unsafe fn weighted_pass<const G: usize, const S: usize>(
    acc: &mut [f32],
    rows: &[f32],
    w: &[f32],
    stride: usize,
    i: &mut usize,
) {
    let d = acc.len() / G;
    let n = rows.len() / d.max(1);
    let p = acc.as_mut_ptr();
    while *i + 16 * S <= d {
        let c = *i;
        let mut a = each!(G, [_mm512_setzero_ps(); S], |g| each!(S, _mm512_setzero_ps(), |s| {
            _mm512_loadu_ps(p.add(g * d + c + 16 * s))
        }));
        for j in 0..n {
            let r = rows.as_ptr().add(j * d + c);
            let v = each!(S, _mm512_setzero_ps(), |s| _mm512_loadu_ps(r.add(16 * s)));
            for (g, a) in a.iter_mut().enumerate() {
                let wj = _mm512_set1_ps(*w.get_unchecked(g * stride + j));
                for (a, v) in a.iter_mut().zip(&v) {
                    *a = _mm512_fmadd_ps(wj, *v, *a);
                }
            }
        }
        for (g, a) in a.iter().enumerate() {
            for (s, a) in a.iter().enumerate() {
                _mm512_storeu_ps(p.add(g * d + c + 16 * s), *a);
            }
        }
        *i += 16 * S;
    }
}
}
