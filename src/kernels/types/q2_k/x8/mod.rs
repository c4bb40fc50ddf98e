//! Q2_K in 8-row groups, one [`BlockQ2Kx8`] per (group, 256-quant block): 672 bytes, as the
//! file's 8 × 84. A generic K-quant layout ([`KQuant`]): quants 0..=3, a 4-bit scale and min
//! per sub-block of 16 (kept packed as the file has them, `scale | min << 4`).
//!
//! Sub-block `j` (32 quants) is 2 lines holding registers `8j + m` (`m < 4`, line 0) and
//! `8j + 4 + m` (line 1) at bits `2m..2m + 2`.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use half::f16;

use super::Q2K;
use crate::kernels::packed::kquant::{kquant_kernels, put_word, register_word, KQuant};
use crate::kernels::packed::{Grouped, LayoutOf, Line32, Zeroable, GROUP};
use crate::quant::blocks::BlockQ2K;

/// A Q2_K matrix in 8-row groups.
pub type Q2Kx8 = Grouped<BlockQ2Kx8>;

pub(super) static LAYOUT: LayoutOf<Q2Kx8> = LayoutOf::new();

/// One (8-row group, block column) of a repacked Q2_K matrix.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct BlockQ2Kx8 {
    /// `[sub-block][row]` `scale | min << 4`.
    pub scales: [[u8; GROUP]; 16],
    pub d: [f16; GROUP],
    pub dmin: [f16; GROUP],
    /// `[32-quant sub-block][line]`, see the module docs.
    pub lines: [[Line32; 2]; 8],
}

// SAFETY: integers and f16 bit patterns only; every bit pattern is a valid value.
unsafe impl Zeroable for BlockQ2Kx8 {}

/// Quant `p` (0..256) of a file block.
fn file_quant(x: &BlockQ2K, p: usize) -> u8 {
    let (h, s, l) = (p / 128, (p % 128) / 32, p % 32);
    (x.qs[32 * h + l] >> (2 * s)) & 3
}

impl KQuant for BlockQ2Kx8 {
    type File = Q2K;
    const SUB: usize = 16;
    const MINS: bool = true;
    const OFFSET: i32 = 0;
    const WIDTH: usize = 8;

    fn put_row(&mut self, r: usize, x: &BlockQ2K) {
        self.d[r] = x.d;
        self.dmin[r] = x.dmin;
        for (c, s) in x.scales.iter().enumerate() {
            self.scales[c][r] = *s;
        }
        for j in 0..8 {
            let q = |m: usize| register_word(8 * j + m, |p| file_quant(x, p));
            for half in 0..2 {
                let v = (0..4).fold(0, |v, m| v | q(4 * half + m) << (2 * m));
                put_word(&mut self.lines[j][half], r, v);
            }
        }
    }

    fn quant(&self, r: usize, p: usize) -> u8 {
        let (reg, byte) = (p / 4, 4 * r + p % 4);
        let (j, m) = (reg / 8, reg % 8);
        (self.lines[j][m / 4].0[byte] >> (2 * (m % 4))) & 3
    }

    fn scale(&self, r: usize, s: usize) -> i32 {
        (self.scales[s][r] & 15) as i32
    }

    fn min(&self, r: usize, s: usize) -> i32 {
        (self.scales[s][r] >> 4) as i32
    }

    fn d(&self) -> &[f16; GROUP] {
        &self.d
    }

    fn dmin(&self) -> &[f16; GROUP] {
        &self.dmin
    }

    kquant_kernels!(BlockQ2Kx8);
}

#[cfg(test)]
mod tests {
    #[test]
    fn put_row_places_every_quant_scale_and_min() {
        crate::kernels::packed::kquant::check_layout::<super::BlockQ2Kx8>(2);
    }
}
