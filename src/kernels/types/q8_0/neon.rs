//! Q8_0 on NEON: the shared dot kernels (both builds) and i8mm tiles.

use std::arch::aarch64::*;

use half::f16;

use crate::kernels::types::q8_family::neon::{base, dotprod, tile, Signed32};
use crate::kernels::types::{tiles, Dense, TileSet};
use crate::quant::blocks::BlockQ8_0;

impl Signed32 for BlockQ8_0 {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn halves(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            (
                vld1q_s8(self.qs.as_ptr()),
                vld1q_s8(self.qs.as_ptr().add(16)),
            )
        }
    }
    fn scale(&self) -> f16 {
        self.d
    }
}

pub(super) const BASE: Dense<BlockQ8_0, BlockQ8_0> = Dense {
    dot: base::dot::<BlockQ8_0>,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ8_0, BlockQ8_0> = Dense {
    dot: dotprod::dot::<BlockQ8_0>,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ8_0, BlockQ8_0> = Dense {
    tiles: tiles!(Pairs, tile, BlockQ8_0),
    tiles_isa: "i8mm",
    ..DOTPROD
};
