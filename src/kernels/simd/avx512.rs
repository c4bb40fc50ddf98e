//! AVX-512 F/BW/VL + VNNI helpers shared by several weight types' kernels.
//!
//! The integer kernels feed unsigned weight codes to `vpdpbusd` (u8 × i8 → i32, no
//! saturation) and subtract the weight offset times the activation sum afterwards, which keeps
//! every result exact.
//!
//! # Safety
//! Every `unsafe fn` here requires the AVX-512 path's features (the backends check).

use std::arch::x86_64::*;

use half::f16;

use crate::quant::dequant_k::unpack_k4_scales;

/// Compiles each item for the AVX-512 path's features.
macro_rules! tf {
    ($($item:item)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        $item
    )*};
}
pub(crate) use tf;

tf! {
#[inline]
pub unsafe fn load256(p: *const u8) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        _mm256_loadu_si256(p as *const __m256i)
    }
}

#[inline]
pub unsafe fn load512(p: *const u8) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        _mm512_loadu_si512(p as *const __m512i)
    }
}

/// Two 32-byte runs as one vector.
#[inline]
pub unsafe fn load2x256(p0: *const u8, p1: *const u8) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        _mm512_inserti64x4(_mm512_castsi256_si512(load256(p0)), load256(p1), 1)
    }
}

/// The nibbles of two Q4_0-style blocks in element order: [b0 lo, b0 hi, b1 lo, b1 hi].
#[inline]
pub unsafe fn nibbles2x32(p0: *const u8, p1: *const u8) -> __m512i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
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
}

/// `d_w * d_a` of two blocks, broadcast to the low and high 8 lanes.
#[inline]
pub unsafe fn scales2(dw0: f16, dw1: f16, da0: f16, da1: f16) -> __m512 {
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
pub unsafe fn dot_offset<const SHIFT: u32>(q: __m512i, a: __m512i) -> __m512i {
    let z = _mm512_setzero_si512();
    let dot = _mm512_dpbusd_epi32(z, q, a);
    let sa = _mm512_dpbusd_epi32(z, _mm512_set1_epi8(1), a);
    _mm512_sub_epi32(dot, _mm512_slli_epi32::<SHIFT>(sa))
}

/// The 8 Q4_K/Q5_K scales as i32 lanes 0..8, and the min correction
/// `sum_j m[j/2] * bsums[j]` as 8 i32 partial sums.
#[inline]
pub unsafe fn k4_prologue(scales: &[u8; 12], bsums: &[i16; 16]) -> (__m512i, __m256i) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let (sc, m) = unpack_k4_scales(scales);
        let scv = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(u64::from_le_bytes(sc) as i64));
        let m8 = _mm_cvtsi64_si128(u64::from_le_bytes(m) as i64);
        let m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        let mins = _mm256_madd_epi16(load256(bsums.as_ptr() as _), m16);
        (scv, mins)
    }
}

/// Lane selector: scale 2j in the low 8 lanes, 2j+1 in the high 8.
#[inline]
pub unsafe fn pair_index(j: i32) -> __m512i {
    let (a, b) = (2 * j, 2 * j + 1);
    _mm512_set_epi32(b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a)
}

#[inline]
pub unsafe fn hsum256(v: __m256) -> f32 {
    _mm512_reduce_add_ps(_mm512_zextps256_ps512(v))
}

/// 16 bf16 values (u16 lanes) widened to f32: each the top half of its f32.
#[inline]
pub unsafe fn bf16_widen16(h: __m256i) -> __m512 {
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
}
}
