//! Q2_K x8 on AVX-512 VNNI: the unpacking of the generic K-quant kernel (two groups).

use std::arch::x86_64::*;

use super::BlockQ2Kx8;
use crate::kernels::packed::avx512::{row_pairs, rows_u8};
use crate::kernels::packed::kquant::avx512::{crumb_registers, KQuantAvx512};
use crate::kernels::simd::avx512::tf;

impl KQuantAvx512 for BlockQ2Kx8 {
    tf! {
    #[inline]
    unsafe fn registers(x0: &Self, x1: &Self, j: usize) -> [__m512i; 8] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { crumb_registers(&x0.lines[j], &x1.lines[j]) }
    }

    #[inline]
    unsafe fn scales(x0: &Self, x1: &Self, s: usize) -> __m512i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { _mm512_and_si512(rows_u8(&x0.scales[s], &x1.scales[s]), _mm512_set1_epi32(15)) }
    }

    #[inline]
    unsafe fn coef_pairs(x0: &Self, x1: &Self, i: usize) -> __m512i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let packed = row_pairs(
                (&x0.scales[2 * i], &x1.scales[2 * i]),
                (&x0.scales[2 * i + 1], &x1.scales[2 * i + 1]),
                false,
            );
            _mm512_srli_epi16(packed, 4)
        }
    }
    }
}
