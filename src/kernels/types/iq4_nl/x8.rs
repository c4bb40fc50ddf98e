//! IQ4_NL in the generic 32-quant 8-row layout: the codebook indices stay nibbles, the kernels
//! look the values up with a byte shuffle (AVX2: signed values and `|v| · (a · sign v)`
//! products; AVX-512: values + 128 for `vpdpbusd`, the scalar twin's unsigned quants).

use half::f16;

use super::IQ4NL;
use crate::kernels::packed::q32::{q32_kernels, Q32x8, Q32};
use crate::kernels::packed::LayoutOf;
use crate::quant::blocks::{BlockIQ4NL, KVALUES_IQ4NL};

pub(super) static LAYOUT: LayoutOf<Q32x8<IQ4NL>> = LayoutOf::new();

impl Q32 for IQ4NL {
    type File = IQ4NL;
    const FIFTH_BIT: bool = false;
    const MIN: bool = false;
    const OFFSET: i32 = 128;

    fn split(x: &BlockIQ4NL) -> ([u8; 32], f16, f16) {
        let codes = std::array::from_fn(|i| (x.qs[i % 16] >> (4 * (i / 16))) & 15);
        (codes, x.d, f16::ZERO)
    }

    fn value(c: u8) -> u8 {
        (KVALUES_IQ4NL[c as usize] as i32 + 128) as u8
    }

    q32_kernels!(IQ4NL);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::IQ4NL;
    use crate::kernels::packed::q32::avx2::Q32Avx2;
    use crate::kernels::packed::q32::avx512::Q32Avx512;
    use crate::kernels::simd::avx2::signed_products;
    use crate::kernels::simd::avx512::tf;
    use crate::quant::blocks::KVALUES_IQ4NL;

    impl Q32Avx2 for IQ4NL {
        const OFFSET_AVX2: i32 = 0;
        /// |v| · |a| pairs fill an i16.
        const I16_SUM: usize = 1;

        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn bytes(codes: [__m256i; 8]) -> [__m256i; 8] {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as _));
                codes.map(|c| _mm256_shuffle_epi8(lut, c))
            }
        }

        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn products(q: __m256i, y: __m256i) -> __m256i {
            // SAFETY: this function\'s `# Safety` contract, which the caller upholds.
            unsafe { signed_products(q, y) }
        }
    }

    impl Q32Avx512 for IQ4NL {
        tf! {
        #[inline]
        unsafe fn bytes(codes: [__m512i; 8]) -> [__m512i; 8] {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let values: [u8; 16] = std::array::from_fn(|i| <super::IQ4NL as crate::kernels::packed::q32::Q32>::value(i as u8));
                let lut = _mm512_broadcast_i32x4(_mm_loadu_si128(values.as_ptr() as _));
                codes.map(|c| _mm512_shuffle_epi8(lut, c))
            }
        }
        }
    }
}
