//! Q4_1 in the generic 32-quant 8-row layout: unsigned nibbles and a min per block.

use half::f16;

use super::Q4_1;
use crate::kernels::packed::q32::{q32_kernels, Q32x8, Q32};
use crate::kernels::packed::LayoutOf;
use crate::quant::blocks::BlockQ4_1;

pub(super) static LAYOUT: LayoutOf<Q32x8<Q4_1>> = LayoutOf::new();

impl Q32 for Q4_1 {
    type File = Q4_1;
    const FIFTH_BIT: bool = false;
    const MIN: bool = true;
    const OFFSET: i32 = 0;

    fn split(x: &BlockQ4_1) -> ([u8; 32], f16, f16) {
        let codes = std::array::from_fn(|i| (x.qs[i % 16] >> (4 * (i / 16))) & 15);
        (codes, x.d, x.m)
    }

    q32_kernels!(Q4_1);
}

#[cfg(target_arch = "x86_64")]
impl crate::kernels::packed::q32::avx2::Q32Avx2 for Q4_1 {}
#[cfg(target_arch = "x86_64")]
impl crate::kernels::packed::q32::avx512::Q32Avx512 for Q4_1 {}
