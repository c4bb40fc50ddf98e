//! Q3_K x8 on AVX-512 VNNI: the unpacking of the generic K-quant kernel (two groups).

use std::arch::x86_64::*;

use super::BlockQ3Kx8;
use crate::kernels::packed::avx512::{lines, rows_i8};
use crate::kernels::packed::kquant::avx512::{
    bit_to, crumb_registers, signed_coef_pairs, KQuantAvx512,
};
use crate::kernels::simd::avx512::tf;

impl KQuantAvx512 for BlockQ3Kx8 {
    tf! {
    #[inline]
    unsafe fn registers(x0: &Self, x1: &Self, j: usize) -> [__m512i; 8] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let q = crumb_registers(&x0.lines[j][..2], &x1.lines[j][..2]);
            let h = lines(&x0.lines[j][2], &x1.lines[j][2]);
            each!(8, _mm512_setzero_si512(), |m| _mm512_or_si512(q[m], bit_to(h, m, 2)))
        }
    }

    #[inline]
    unsafe fn scales(x0: &Self, x1: &Self, s: usize) -> __m512i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { rows_i8(&x0.scales[s], &x1.scales[s]) }
    }

    #[inline]
    unsafe fn coef_pairs(x0: &Self, x1: &Self, i: usize) -> __m512i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { signed_coef_pairs(&x0.scales, &x1.scales, i) }
    }
    }
}
