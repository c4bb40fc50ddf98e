//! Q5_K x8 on AVX2: the unpacking of the generic K-quant kernel.

use std::arch::x86_64::*;

use super::BlockQ5Kx8;
use crate::kernels::packed::avx2::pairs_u8;
use crate::kernels::packed::kquant::avx2::{bit_to, nibble_registers, KQuantAvx2};

impl KQuantAvx2 for BlockQ5Kx8 {
    /// 4 · 2 · 31 · 127 < 2^15.
    const I16_SUM: usize = 4;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn registers(x: &Self, j: usize) -> [__m256i; 8] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let q = nibble_registers(&x.lines[j][..4]);
            let h = _mm256_load_si256(x.lines[j][4].0.as_ptr() as *const __m256i);
            each!(8, _mm256_setzero_si256(), |m| _mm256_or_si256(
                q[m],
                bit_to(h, m, 4)
            ))
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scale_pairs(x: &Self, s: usize) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { pairs_u8(&x.scales[s], &x.scales[s]) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn coef_pairs(x: &Self, i: usize) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { pairs_u8(&x.mins[2 * i], &x.mins[2 * i + 1]) }
    }
}
