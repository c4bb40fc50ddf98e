//! Q8_0 x8 on AMX: each pair's block copied once into a tile of its signed quants for the
//! 32-quant tile driver.

use std::arch::x86_64::*;

use super::Q8_0x8;
use crate::kernels::packed::amx::blocks32::{matmul_pairs, Blocks32};
use crate::kernels::packed::avx512::{lines, rows_f32};
use crate::kernels::packed::PackedKernels;

/// On AMX CPUs (Sapphire Rapids and later) the two-group kernel also takes single tokens:
/// 1.5B Q8_0 tg64 7.4 -> 8.5 t/s on one thread, 14.3 -> 16.1 on two (two weight streams in
/// flight instead of one).
pub(super) const KERNELS: PackedKernels<Q8_0x8> = PackedKernels {
    tiles: Some(matmul_pairs::<Q8_0x8>),
    pair_min: 1,
    ..super::avx512::KERNELS
};

impl Blocks32 for Q8_0x8 {
    fn nb(&self) -> usize {
        self.nb
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn unpack(&self, g: usize, b: usize, out: *mut u8) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let (x0, x1) = (g * self.nb + b, (g + 1) * self.nb + b);
            for k in 0..8 {
                let q = lines(&self.qs[x0 * 8 + k], &self.qs[x1 * 8 + k]);
                _mm512_storeu_si512(out.add(64 * k) as *mut __m512i, q);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn scales(&self, g: usize, b: usize) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { rows_f32(&self.d[g * self.nb + b], &self.d[(g + 1) * self.nb + b]) }
    }
}
