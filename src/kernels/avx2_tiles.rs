//! AVX2 multi-row / multi-token tile kernels: `R` weight rows times `T` activation rows per
//! call, so each unpacked weight block (nibbles, high bits, scales; for the float types each
//! widened slice) is reused for `T` tokens and each activation block for `R` rows. Per (row,
//! token) the integer sums per sub-block are exactly those of the one-by-one kernels in
//! [`super::avx2`]; only the f32 accumulation order differs.
//!
//! # Safety
//! Every `pub unsafe fn` here requires AVX2, FMA and F16C ([`super::avx2::detected`]) and
//! activations from the crate's quantizers (quants in -127..=127, which the sign trick relies
//! on). Rows should have equal block counts; only the shortest row's count is used.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::avx2::{
    bf16x8, bytes_from_bits, f16_to_f32, hsum_ps, k4_scale_vectors, load128, load256, nibbles32,
    q6k_unpack_half,
};
use super::{common_len, scalar, Widen};
use crate::quant::blocks::*;

/// Horizontal sums of every accumulator: one reduction per (row, token), not per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn reduce<const R: usize, const T: usize>(acc: &[[__m256; T]; R]) -> [[f32; T]; R] {
    let mut out = [[0.0; T]; R];
    for r in 0..R {
        for t in 0..T {
            out[r][t] = hsum_ps(acc[r][t]);
        }
    }
    out
}

/// Tile kernels for the 32-element block types whose weights fit a signed byte: `$unpack`
/// turns a block into 32 signed quants; the product uses the same sign trick as the Q8_0
/// one-by-one kernel (|w| * sign(a, w), exact for |w| <= 128 and |a| <= 127). At most 8
/// tokens per tile.
macro_rules! q8_family_tile {
    ($(#[$doc:meta])* $name:ident, $B:ty, |$x:ident| $unpack:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// See the module docs.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name<const R: usize, const T: usize>(
            w: [&[$B]; R],
            a: [&[BlockQ8_0]; T],
        ) -> [[f32; T]; R] {
            let n = common_len(&w, &a);
            let ones = _mm256_set1_epi16(1);
            let mut acc = [[_mm256_setzero_ps(); T]; R];
            // The activation scales of a block column go through one conversion (T <= 8).
            const { assert!(T <= 8) };
            for i in 0..n {
                let mut bits = [0u64; 2];
                for t in 0..T {
                    bits[t / 4] |= (a[t].get_unchecked(i).d.to_bits() as u64) << (16 * (t % 4));
                }
                let dy = _mm256_cvtph_ps(_mm_set_epi64x(bits[1] as i64, bits[0] as i64));
                for r in 0..R {
                    let $x = w[r].get_unchecked(i);
                    let q: __m256i = $unpack;
                    let d = _mm256_mul_ps(_mm256_set1_ps(f16_to_f32($x.d)), dy);
                    let aq = _mm256_sign_epi8(q, q);
                    for t in 0..T {
                        let y = load256(a[t].get_unchecked(i).qs.as_ptr() as _);
                        let p = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(y, q));
                        let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                        let dt = _mm256_permutevar8x32_ps(d, _mm256_set1_epi32(t as i32));
                        acc[r][t] = _mm256_fmadd_ps(dt, p, acc[r][t]);
                    }
                }
            }
            reduce(&acc)
        }
    };
}

q8_family_tile!(
    /// Q4_0 weights × Q8_0 activations, `R` rows × `T` tokens.
    q4_0_tile,
    BlockQ4_0,
    |x| _mm256_sub_epi8(nibbles32(x.qs.as_ptr()), _mm256_set1_epi8(8))
);

q8_family_tile!(
    /// Q5_0 weights × Q8_0 activations, `R` rows × `T` tokens.
    q5_0_tile,
    BlockQ5_0,
    // q - 16 = nibble | 0xf0 where the 5th bit is clear (two's complement).
    |x| _mm256_or_si256(
        nibbles32(x.qs.as_ptr()),
        _mm256_andnot_si256(
            bytes_from_bits(u32::from_le_bytes(x.qh)),
            _mm256_set1_epi8(0xf0u8 as i8)
        )
    )
);

q8_family_tile!(
    /// Q8_0 weights × Q8_0 activations, `R` rows × `T` tokens.
    q8_0_tile,
    BlockQ8_0,
    |x| load256(x.qs.as_ptr() as _)
);

/// Q4_K weights × Q8_K activations, `R` rows × `T` tokens.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_k_tile<const R: usize, const T: usize>(
    w: [&[BlockQ4K]; R],
    a: [&[BlockQ8K]; T],
) -> [[f32; T]; R] {
    let n = common_len(&w, &a);
    let m4 = _mm256_set1_epi8(0x0f);
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    for i in 0..n {
        for r in 0..R {
            let x = w[r].get_unchecked(i);
            let (sc, m) = scalar::unpack_k4_scales(&x.scales);
            let scv = k4_scale_vectors(sc);
            // Each min covers two 16-element bsums groups.
            let m8 = _mm_cvtsi64_si128(u64::from_le_bytes(m) as i64);
            let m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
            let mut sumi = [_mm256_setzero_si256(); T];
            for j in 0..4 {
                let q = load256(x.qs.as_ptr().add(32 * j));
                let lo = _mm256_and_si256(q, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                for t in 0..T {
                    let yq = a[t].get_unchecked(i).qs.as_ptr().add(64 * j) as *const u8;
                    let plo = _mm256_maddubs_epi16(lo, load256(yq));
                    let phi = _mm256_maddubs_epi16(hi, load256(yq.add(32)));
                    let plo = _mm256_madd_epi16(plo, scv[2 * j]);
                    let phi = _mm256_madd_epi16(phi, scv[2 * j + 1]);
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(plo, phi));
                }
            }
            let (d, dmin) = (f16_to_f32(x.d), f16_to_f32(x.dmin));
            for t in 0..T {
                let y = a[t].get_unchecked(i);
                let mins = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), m16);
                let s = _mm256_fmadd_ps(
                    _mm256_set1_ps(d * y.d),
                    _mm256_cvtepi32_ps(sumi[t]),
                    acc[r][t],
                );
                acc[r][t] =
                    _mm256_fnmadd_ps(_mm256_set1_ps(dmin * y.d), _mm256_cvtepi32_ps(mins), s);
            }
        }
    }
    reduce(&acc)
}

/// Q6_K weights × Q8_K activations, `R` rows × `T` tokens.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q6_k_tile<const R: usize, const T: usize>(
    w: [&[BlockQ6K]; R],
    a: [&[BlockQ8K]; T],
) -> [[f32; T]; R] {
    let n = common_len(&w, &a);
    // Per 128-bit lane, broadcast i16 element 0 (low lane) or 1 (high lane) of a dword.
    let pick = _mm256_setr_epi8(
        0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, //
        2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
    );
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    for i in 0..n {
        for r in 0..R {
            let x = w[r].get_unchecked(i);
            let sc16 = _mm256_cvtepi8_epi16(load128(x.scales.as_ptr() as _));
            let mut sumi = [_mm256_setzero_si256(); T];
            for t in 0..T {
                // q - 32 is applied as -32 * sum(scale * bsum).
                let y = a[t].get_unchecked(i);
                let corr = _mm256_madd_epi16(load256(y.bsums.as_ptr() as _), sc16);
                sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
            }
            for h in 0..2 {
                let q = q6k_unpack_half(x, h);
                for (k, &qk) in q.iter().enumerate() {
                    // Scales of groups 8h+2k (low lane) and 8h+2k+1 (high lane).
                    let pair =
                        _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32((4 * h + k) as i32));
                    let s = _mm256_shuffle_epi8(pair, pick);
                    for t in 0..T {
                        let yq = a[t].get_unchecked(i).qs.as_ptr().add(128 * h + 32 * k);
                        let p = _mm256_maddubs_epi16(qk, load256(yq as _));
                        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, s));
                    }
                }
            }
            let d = f16_to_f32(x.d);
            for t in 0..T {
                let dd = _mm256_set1_ps(d * a[t].get_unchecked(i).d);
                acc[r][t] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sumi[t]), acc[r][t]);
            }
        }
    }
    reduce(&acc)
}

/// 8 values of a float weight type, widened to f32 exactly.
pub(super) trait Lanes8: Widen {
    /// # Safety
    /// AVX2, FMA and F16C; 8 values readable at `p`.
    unsafe fn load8(p: *const Self) -> __m256;
}

impl Lanes8 for f32 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
}

impl Lanes8 for f16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(p: *const f16) -> __m256 {
        _mm256_cvtph_ps(load128(p as *const u8))
    }
}

impl Lanes8 for bf16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(p: *const bf16) -> __m256 {
        bf16x8(p as *const u8)
    }
}

/// `R` rows × `T` tokens of a float type `E` (f32, f16, bf16): each 8-element slice of a row
/// widened once for all tokens and each token's once for all rows (the dot kernels widen both
/// per pair); the products are the dot kernels', the order of the f32 sums differs. The last
/// `n % 8` elements go through a scalar loop, as in those kernels.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn float_tile<E: Lanes8, const R: usize, const T: usize>(
    w: [&[E]; R],
    a: [&[E]; T],
) -> [[f32; T]; R] {
    let n = common_len(&w, &a);
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    let mut i = 0;
    while i + 8 <= n {
        let x: [__m256; R] = std::array::from_fn(|r| E::load8(w[r].as_ptr().add(i)));
        for t in 0..T {
            let y = E::load8(a[t].as_ptr().add(i));
            for r in 0..R {
                acc[r][t] = _mm256_fmadd_ps(x[r], y, acc[r][t]);
            }
        }
        i += 8;
    }
    let mut out = reduce(&acc);
    for r in 0..R {
        for t in 0..T {
            for j in i..n {
                out[r][t] += w[r][j].widen() * a[t][j].widen();
            }
        }
    }
    out
}
