//! Q4_0 on AVX2: the dot per token (nibbles as unsigned bytes, the offset of 8 taken off per
//! block as `8 · sum(a)`), the shared tiles for batches.
//!
//! # Safety
//! Every `pub unsafe fn` requires AVX2, FMA and F16C and activations from the crate's
//! quantizers.

use std::arch::x86_64::*;

use half::f16;

use crate::kernels::simd::avx2::{f16_to_f32, hsum_ps, load256, nibbles32};
use crate::kernels::types::q8_family::avx2::{tile, Signed32};
use crate::kernels::types::{tiles, Dense};
use crate::quant::blocks::{BlockQ4_0, BlockQ8_0};

pub(super) const DENSE: Dense<BlockQ4_0, BlockQ8_0> = Dense {
    dot,
    dot_isa: "avx2",
    tiles: tiles!(Rows1, tile, BlockQ4_0),
    tiles_isa: "avx2",
};

impl Signed32 for BlockQ4_0 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn signed(&self) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm256_sub_epi8(nibbles32(self.qs.as_ptr()), _mm256_set1_epi8(8)) }
    }
    fn scale(&self) -> f16 {
        self.d
    }
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
pub unsafe fn dot(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
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
}
