//! Q8_0 on AVX2, weights in place (`KOLIBRI_REPACK=0`): the shared dot and tiles.

use std::arch::x86_64::*;

use half::f16;

use crate::kernels::simd::avx2::load256;
use crate::kernels::types::q8_family::avx2::{dot, tile, Signed32};
use crate::kernels::types::{tiles, Dense};
use crate::quant::blocks::BlockQ8_0;

pub(super) const DENSE: Dense<BlockQ8_0, BlockQ8_0> = Dense {
    dot: dot::<BlockQ8_0>,
    dot_isa: "avx2",
    tiles: tiles!(Rows1, tile, BlockQ8_0),
    tiles_isa: "avx2",
};

impl Signed32 for BlockQ8_0 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn signed(&self) -> __m256i {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { load256(self.qs.as_ptr() as _) }
    }
    fn scale(&self) -> f16 {
        self.d
    }
}
