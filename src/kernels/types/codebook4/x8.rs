//! A codebook type in the generic 32-quant 8-row layout: the codebook indices stay nibbles,
//! the kernels look the values up with a byte shuffle (AVX2: signed values and
//! `|v| · (a · sign v)` products; AVX-512: values + 128 for `vpdpbusd`, the scalar twin's
//! unsigned quants).

/// The [`Q32`](crate::kernels::packed::q32::Q32) layout `LAYOUT` of codebook type `$T`, whose
/// blocks' scales `$scale` gives as an exact f16 (`None`: the matrix stays in place).
macro_rules! codebook_layout {
    ($T:ident, |$x:ident| $scale:expr) => {
        pub(super) static LAYOUT: $crate::kernels::packed::LayoutOf<
            $crate::kernels::packed::q32::Q32x8<$T>,
        > = $crate::kernels::packed::LayoutOf::new();

        impl $crate::kernels::packed::q32::Q32 for $T {
            type File = $T;
            const FIFTH_BIT: bool = false;
            const MIN: bool = false;
            const OFFSET: i32 = 128;

            fn packable(w: &[<$T as $crate::kernels::types::WeightType>::Block]) -> bool {
                w.iter().all(|$x| $scale.is_some())
            }

            fn split(
                $x: &<$T as $crate::kernels::types::WeightType>::Block,
            ) -> ([u8; 32], half::f16, half::f16) {
                let codes = std::array::from_fn(|i| ($x.qs[i % 16] >> (4 * (i / 16))) & 15);
                (codes, $scale.unwrap_or(half::f16::ZERO), half::f16::ZERO)
            }

            fn value(c: u8) -> u8 {
                $crate::kernels::types::codebook4::x8::offset_value::<
                    <$T as $crate::kernels::types::WeightType>::Block,
                >(c)
            }

            $crate::kernels::packed::q32::q32_kernels!($T);
        }

        #[cfg(target_arch = "x86_64")]
        impl $crate::kernels::packed::q32::avx2::Q32Avx2 for $T {
            const OFFSET_AVX2: i32 = 0;
            /// |v| · |a| pairs fill an i16.
            const I16_SUM: usize = 1;

            #[inline]
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn bytes(codes: [std::arch::x86_64::__m256i; 8]) -> [std::arch::x86_64::__m256i; 8] {
                // SAFETY: this function's `# Safety` contract, which the caller upholds.
                unsafe {
                    $crate::kernels::types::codebook4::x8::avx2_values::<
                        <$T as $crate::kernels::types::WeightType>::Block,
                    >(codes)
                }
            }

            #[inline]
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn products(
                q: std::arch::x86_64::__m256i,
                y: std::arch::x86_64::__m256i,
            ) -> std::arch::x86_64::__m256i {
                // SAFETY: this function's `# Safety` contract, which the caller upholds.
                unsafe { $crate::kernels::simd::avx2::signed_products(q, y) }
            }
        }

        #[cfg(target_arch = "x86_64")]
        impl $crate::kernels::packed::q32::avx512::Q32Avx512 for $T {
            $crate::kernels::simd::avx512::tf! {
            #[inline]
            unsafe fn bytes(codes: [std::arch::x86_64::__m512i; 8]) -> [std::arch::x86_64::__m512i; 8] {
                // SAFETY: this function's `# Safety` contract, which the caller upholds.
                unsafe {
                    $crate::kernels::types::codebook4::x8::avx512_values::<
                        <$T as $crate::kernels::types::WeightType>::Block,
                    >(codes)
                }
            }
            }
        }
    };
}
pub(crate) use codebook_layout;

use crate::quant::blocks::CodebookBlock;

/// The scalar twin's unsigned quant of code `c`: its value + 128.
pub(crate) fn offset_value<B: CodebookBlock>(c: u8) -> u8 {
    (B::CODEBOOK[c as usize] as i32 + 128) as u8
}

/// Codes (one per byte) to their signed codebook values.
///
/// # Safety
/// AVX2 must be available.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn avx2_values<B: CodebookBlock>(
    codes: [std::arch::x86_64::__m256i; 8],
) -> [std::arch::x86_64::__m256i; 8] {
    use std::arch::x86_64::*;
    // SAFETY: AVX2, which the caller guarantees; the load reads the 16-byte codebook.
    unsafe {
        let book = B::CODEBOOK;
        let lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(book.as_ptr() as _));
        codes.map(|c| _mm256_shuffle_epi8(lut, c))
    }
}

/// Codes (one per byte) to the scalar twin's unsigned quants (value + 128).
///
/// # Safety
/// AVX-512 F, BW (and the features `tf!` enables) must be available.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn avx512_values<B: CodebookBlock>(
    codes: [std::arch::x86_64::__m512i; 8],
) -> [std::arch::x86_64::__m512i; 8] {
    use std::arch::x86_64::*;
    // SAFETY: AVX-512 F and BW, which the caller guarantees; the load reads 16 bytes.
    unsafe {
        let values: [u8; 16] = std::array::from_fn(|i| offset_value::<B>(i as u8));
        let lut = _mm512_broadcast_i32x4(_mm_loadu_si128(values.as_ptr() as _));
        codes.map(|c| _mm512_shuffle_epi8(lut, c))
    }
}
