//! The generic 32-quant layouts without mins on AMX: each pair's block unpacked to signed
//! bytes (`u − OFFSET`) for the 32-quant tile driver.

use std::arch::x86_64::*;

use super::avx512::{codes, Q32Avx512};
use super::Q32x8;
use crate::kernels::packed::amx::blocks32::Blocks32;
use crate::kernels::packed::avx512::rows_f32;

impl<S: Q32Avx512> Blocks32 for Q32x8<S> {
    fn nb(&self) -> usize {
        self.nb
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn unpack(&self, g: usize, b: usize, out: *mut u8) {
        debug_assert!(!S::MIN, "the tile driver has no mins");
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let q = S::bytes(codes(self, g * self.nb + b, (g + 1) * self.nb + b));
            let off = _mm512_set1_epi8(S::OFFSET_AVX512 as i8);
            for (k, q) in q.iter().enumerate() {
                _mm512_storeu_si512(out.add(64 * k) as *mut __m512i, _mm512_sub_epi8(*q, off));
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn scales(&self, g: usize, b: usize) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { rows_f32(&self.d[g * self.nb + b], &self.d[(g + 1) * self.nb + b]) }
    }
}
