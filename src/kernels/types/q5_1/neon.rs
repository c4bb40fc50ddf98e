//! Q5_1 on NEON: Q4_1's kernels ([`Unsigned32`]: the dot per token in both builds, i8mm
//! tiles) with the fifth bits ORed in.

use std::arch::aarch64::*;

use half::f16;

use crate::kernels::simd::neon::q5_high_bits;
use crate::kernels::types::q4_1::neon::{base, dotprod, tile, Unsigned32};
use crate::kernels::types::{tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ5_1, BlockQ8_0};

impl Unsigned32 for BlockQ5_1 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn halves(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let q = vld1q_u8(self.qs.as_ptr());
            let (h0, h1) = q5_high_bits(&self.qh);
            (
                vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(15)), h0)),
                vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), h1)),
            )
        }
    }
    fn scale(&self) -> f16 {
        self.d
    }
    fn minimum(&self) -> f16 {
        self.m
    }
}

pub(super) const BASE: Dense<BlockQ5_1, BlockQ8_0> = Dense {
    dot: base::dot::<BlockQ5_1>,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ5_1, BlockQ8_0> = Dense {
    dot: dotprod::dot::<BlockQ5_1>,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ5_1, BlockQ8_0> = Dense {
    tiles: tiles!(Pairs, tile, BlockQ5_1),
    tiles_isa: "i8mm",
    ..DOTPROD
};
