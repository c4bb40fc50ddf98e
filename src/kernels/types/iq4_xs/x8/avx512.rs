//! IQ4_XS x8 on AVX-512 VNNI: the unpacking of the generic K-quant kernel (two groups), the
//! codebook values offset by 128 into unsigned bytes for `vpdpbusd`.

use std::arch::x86_64::*;

use super::BlockIQ4XSx8;
use crate::kernels::packed::avx512::rows_i8;
use crate::kernels::packed::kquant::avx512::{nibble_registers, signed_coef_pairs, KQuantAvx512};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::KVALUES_IQ4NL;

/// The codebook plus 128, as unsigned bytes.
const UNSIGNED_VALUES: [u8; 16] = {
    let mut v = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        v[i] = (KVALUES_IQ4NL[i] as i32 + 128) as u8;
        i += 1;
    }
    v
};

impl KQuantAvx512 for BlockIQ4XSx8 {
    tf! {
    #[inline]
    unsafe fn registers(x0: &Self, x1: &Self, j: usize) -> [__m512i; 8] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let lut = _mm512_broadcast_i32x4(_mm_loadu_si128(UNSIGNED_VALUES.as_ptr() as _));
            nibble_registers(&x0.lines[j], &x1.lines[j]).map(|i| _mm512_shuffle_epi8(lut, i))
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
