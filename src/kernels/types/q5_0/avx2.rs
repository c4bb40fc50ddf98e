//! Q5_0 on AVX2, weights in place (`KOLIBRI_REPACK=0`): the shared dot and tiles over the
//! signed quants.

use std::arch::x86_64::*;

use half::f16;

use crate::kernels::simd::avx2::{bytes_from_bits, nibbles32};
use crate::kernels::types::q8_family::avx2::{dot, tile, Signed32};
use crate::kernels::types::{tiles, Dense};
use crate::quant::blocks::{BlockQ5_0, BlockQ8_0};

pub(super) const DENSE: Dense<BlockQ5_0, BlockQ8_0> = Dense {
    dot: dot::<BlockQ5_0>,
    dot_isa: "avx2",
    tiles: tiles!(Rows1, tile, BlockQ5_0),
    tiles_isa: "avx2",
};

impl Signed32 for BlockQ5_0 {
    /// `q - 16` = `nibble | 0xf0` where the fifth bit is clear (two's complement).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn signed(&self) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let hi = _mm256_andnot_si256(
                bytes_from_bits(u32::from_le_bytes(self.qh)),
                _mm256_set1_epi8(0xf0u8 as i8),
            );
            _mm256_or_si256(nibbles32(self.qs.as_ptr()), hi)
        }
    }
    fn scale(&self) -> f16 {
        self.d
    }
}
