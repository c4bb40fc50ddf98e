//! Q5_0 on NEON: the shared dot kernels (both builds) and i8mm tiles.

use std::arch::aarch64::*;

use half::f16;

use crate::kernels::simd::neon::q5_high_bits;
use crate::kernels::types::q8_family::neon::{base, dotprod, tile, Signed32};
use crate::kernels::types::{tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ5_0, BlockQ8_0};

impl Signed32 for BlockQ5_0 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn halves(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let q = vld1q_u8(self.qs.as_ptr());
            let (m4, off) = (vdupq_n_u8(15), vdupq_n_s8(16));
            let (h0, h1) = q5_high_bits(&self.qh);
            let lo = vorrq_u8(vandq_u8(q, m4), h0);
            let hi = vorrq_u8(vshrq_n_u8(q, 4), h1);
            (
                vsubq_s8(vreinterpretq_s8_u8(lo), off),
                vsubq_s8(vreinterpretq_s8_u8(hi), off),
            )
        }
    }
    fn scale(&self) -> f16 {
        self.d
    }
}

pub(super) const BASE: Dense<BlockQ5_0, BlockQ8_0> = Dense {
    dot: base::dot::<BlockQ5_0>,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ5_0, BlockQ8_0> = Dense {
    dot: dotprod::dot::<BlockQ5_0>,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ5_0, BlockQ8_0> = Dense {
    tiles: tiles!(Pairs, tile, BlockQ5_0),
    tiles_isa: "i8mm",
    ..DOTPROD
};
