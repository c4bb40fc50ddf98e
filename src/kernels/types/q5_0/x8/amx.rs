//! Q5_0 x8 on AMX: each pair's block unpacked once to a tile of signed quants (`q - 16`) for
//! the 32-quant tile driver.

use std::arch::x86_64::*;

use super::Q5_0x8;
use crate::kernels::packed::amx::blocks32::{matmul_pairs, Blocks32};
use crate::kernels::packed::avx512::rows_f32;
use crate::kernels::packed::PackedKernels;

pub(super) const KERNELS: PackedKernels<Q5_0x8> = PackedKernels {
    tiles: Some(matmul_pairs::<Q5_0x8>),
    ..super::avx512::KERNELS
};

impl Blocks32 for Q5_0x8 {
    fn nb(&self) -> usize {
        self.nb
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn unpack(&self, g: usize, b: usize, out: *mut u8) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let q = super::avx512::q5_0_registers(self, g * self.nb + b, (g + 1) * self.nb + b);
            let b16 = _mm512_set1_epi8(16);
            for (k, q) in q.iter().enumerate() {
                let signed = _mm512_sub_epi8(*q, b16);
                _mm512_storeu_si512(out.add(64 * k) as *mut __m512i, signed);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn scales(&self, g: usize, b: usize) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { rows_f32(&self.d[g * self.nb + b], &self.d[(g + 1) * self.nb + b]) }
    }
}
