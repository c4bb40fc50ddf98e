//! AVX2 + FMA + F16C helpers shared by several weight types' kernels.
//!
//! # Safety
//! Every `unsafe fn` here requires AVX2, FMA and F16C (the backends check).

use std::arch::x86_64::*;

use half::f16;

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_to_f32(h: f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.to_bits() as i32)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn load256(p: *const u8) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn load128(p: *const u8) -> __m128i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm_loadu_si128(p as *const __m128i) }
}

/// 16 packed nibbles -> 32 bytes: low nibbles in the low lane, high nibbles in the high lane
/// (the Q4_0/Q5_0 element order).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn nibbles32(p: *const u8) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let q = load128(p);
        _mm256_and_si256(
            _mm256_set_m128i(_mm_srli_epi16(q, 4), q),
            _mm256_set1_epi8(0x0f),
        )
    }
}

/// Bit j of `bits` -> byte j = 0xff or 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn bytes_from_bits(bits: u32) -> __m256i {
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

/// `d_w * d_a` of a block pair: both f16 scales converted by one instruction.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn d_product(dw: f16, da: f16) -> __m256 {
    let h = dw.to_bits() as u32 | (da.to_bits() as u32) << 16;
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(h as i32));
    _mm256_broadcastss_ps(_mm_mul_ss(v, _mm_movehdup_ps(v)))
}

/// The i16 pair sums of signed bytes `q * a`, via |q| * (a with q's sign) (maddubs needs an
/// unsigned operand). Exact for |q| <= 128, |a| <= 127.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn signed_products(q: __m256i, a: __m256i) -> __m256i {
    _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q))
}

/// Sum over 32 signed bytes of `q * a` as 8 i32 partial sums ([`signed_products`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_i8(q: __m256i, a: __m256i) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { _mm256_madd_epi16(signed_products(q, a), _mm256_set1_epi16(1)) }
}

/// Broadcasts of each Q4_K/Q5_K sub-block scale to 16 i16 lanes, from the 8 scale bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn k4_scale_vectors(sc: [u8; 8]) -> [__m256i; 8] {
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
pub unsafe fn k4_min_products(m: [u8; 8], bsums: &[i16; 16]) -> __m256i {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let m8 = _mm_cvtsi64_si128(u64::from_le_bytes(m) as i64);
        let m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        _mm256_madd_epi16(load256(bsums.as_ptr() as _), m16)
    }
}

/// Horizontal sums of every accumulator: one reduction per (row, token), not per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn reduce<const R: usize, const T: usize>(acc: &[[__m256; T]; R]) -> [[f32; T]; R] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut out = [[0.0; T]; R];
        for r in 0..R {
            for t in 0..T {
                out[r][t] = hsum_ps(acc[r][t]);
            }
        }
        out
    }
}
