//! Q2_K x8 on AVX2: the unpacking of the generic K-quant kernel.

use std::arch::x86_64::*;

use super::BlockQ2Kx8;
use crate::kernels::packed::avx2::pairs_u8;
use crate::kernels::packed::kquant::avx2::{crumb_registers, KQuantAvx2};

impl KQuantAvx2 for BlockQ2Kx8 {
    /// 4 · 2 · 3 · 127 < 2^15.
    const I16_SUM: usize = 4;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn registers(x: &Self, j: usize) -> [__m256i; 8] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { crumb_registers(&x.lines[j]) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scale_pairs(x: &Self, s: usize) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm256_and_si256(pairs_u8(&x.scales[s], &x.scales[s]), _mm256_set1_epi16(15)) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn coef_pairs(x: &Self, i: usize) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm256_srli_epi16(pairs_u8(&x.scales[2 * i], &x.scales[2 * i + 1]), 4) }
    }
}
