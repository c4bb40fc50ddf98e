//! Q4_0 in the generic 32-quant 8-row layout: unsigned nibbles, offset 8.

use half::f16;

use super::Q4_0;
use crate::kernels::packed::q32::{q32_kernels, Q32x8, Q32};
use crate::kernels::packed::LayoutOf;
use crate::quant::blocks::BlockQ4_0;

pub(super) static LAYOUT: LayoutOf<Q32x8<Q4_0>> = LayoutOf::new();

impl Q32 for Q4_0 {
    type File = Q4_0;
    const FIFTH_BIT: bool = false;
    const MIN: bool = false;
    const OFFSET: i32 = 8;

    fn split(x: &BlockQ4_0) -> ([u8; 32], f16, f16) {
        let codes = std::array::from_fn(|i| (x.qs[i % 16] >> (4 * (i / 16))) & 15);
        (codes, x.d, f16::ZERO)
    }

    q32_kernels!(Q4_0);
}

#[cfg(target_arch = "x86_64")]
impl crate::kernels::packed::q32::avx2::Q32Avx2 for Q4_0 {}
#[cfg(target_arch = "x86_64")]
impl crate::kernels::packed::q32::avx512::Q32Avx512 for Q4_0 {}
