//! Q5_1 in the generic 32-quant 8-row layout: unsigned 5-bit codes and a min per block.

use half::f16;

use super::Q5_1;
use crate::kernels::packed::q32::{q32_kernels, Q32x8, Q32};
use crate::kernels::packed::LayoutOf;
use crate::quant::blocks::BlockQ5_1;

pub(super) static LAYOUT: LayoutOf<Q32x8<Q5_1>> = LayoutOf::new();

impl Q32 for Q5_1 {
    type File = Q5_1;
    const FIFTH_BIT: bool = true;
    const MIN: bool = true;
    const OFFSET: i32 = 0;

    fn split(x: &BlockQ5_1) -> ([u8; 32], f16, f16) {
        let qh = u32::from_le_bytes(x.qh);
        let codes = std::array::from_fn(|i| {
            let nibble = (x.qs[i % 16] >> (4 * (i / 16))) & 15;
            nibble | (((qh >> i) & 1) << 4) as u8
        });
        (codes, x.d, x.m)
    }

    q32_kernels!(Q5_1);
}

#[cfg(target_arch = "x86_64")]
impl crate::kernels::packed::q32::avx2::Q32Avx2 for Q5_1 {}
#[cfg(target_arch = "x86_64")]
impl crate::kernels::packed::q32::avx512::Q32Avx512 for Q5_1 {}
