//! IQ4_XS x8 on AVX2: the unpacking of the generic K-quant kernel. The registers hold the
//! signed codebook values and the products are `|v| · (a · sign v)` (`vpmaddubsw` needs an
//! unsigned operand; |v|, |a| <= 127 keep each pair sum exact in i16, but not two of them).

use std::arch::x86_64::*;

use super::BlockIQ4XSx8;
use crate::kernels::packed::avx2::pairs_i8;
use crate::kernels::packed::kquant::avx2::{nibble_registers, KQuantAvx2};
use crate::kernels::simd::avx2::signed_products;
use crate::quant::blocks::KVALUES_IQ4NL;

impl KQuantAvx2 for BlockIQ4XSx8 {
    const OFFSET_AVX2: i32 = 0;
    const I16_SUM: usize = 1;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn registers(x: &Self, j: usize) -> [__m256i; 8] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as _));
            nibble_registers(&x.lines[j]).map(|i| _mm256_shuffle_epi8(lut, i))
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn products(q: __m256i, y: __m256i) -> __m256i {
        // SAFETY: this function\'s `# Safety` contract, which the caller upholds.
        unsafe { signed_products(q, y) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scale_pairs(x: &Self, s: usize) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { pairs_i8(&x.scales[s], &x.scales[s]) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn coef_pairs(x: &Self, i: usize) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { pairs_i8(&x.scales[2 * i], &x.scales[2 * i + 1]) }
    }
}
