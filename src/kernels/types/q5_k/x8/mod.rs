//! Q5_K in 8-row groups, one [`BlockQ5Kx8`] per (group, 256-quant block): 1440 bytes where the
//! file has 8 × 176 = 1408. A generic K-quant layout ([`KQuant`]): unsigned quants 0..=31,
//! a 6-bit scale and min per sub-block of 32.
//!
//! Sub-block `j` is 5 lines, read front to back: lines 0..4 hold registers `8j + m` (low
//! nibbles, `m < 4`) and `8j + m + 4` (high nibbles) of line `m`, as Q4_K's layout; line 4 has
//! the fifth bit of register `8j + m` at bit `m` of each byte.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use half::f16;

use super::Q5K;
use crate::kernels::packed::kquant::{kquant_kernels, put_word, register_word, KQuant};
use crate::kernels::packed::{Grouped, LayoutOf, Line32, Zeroable, GROUP};
use crate::quant::blocks::BlockQ5K;
use crate::quant::dequant_k::get_scale_min_k4;

/// A Q5_K matrix in 8-row groups.
pub type Q5Kx8 = Grouped<BlockQ5Kx8>;

pub(super) static LAYOUT: LayoutOf<Q5Kx8> = LayoutOf::new();

/// One (8-row group, block column) of a repacked Q5_K matrix.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct BlockQ5Kx8 {
    /// `[sub-block][row]` 6-bit scales.
    pub scales: [[u8; GROUP]; 8],
    /// `[sub-block][row]` 6-bit mins.
    pub mins: [[u8; GROUP]; 8],
    pub d: [f16; GROUP],
    pub dmin: [f16; GROUP],
    /// `[sub-block][line]`, see the module docs.
    pub lines: [[Line32; 5]; 8],
}

// SAFETY: integers and f16 bit patterns only; every bit pattern is a valid value.
unsafe impl Zeroable for BlockQ5Kx8 {}

/// Quant `p` (0..256, 0..=31) of a file block.
fn file_quant(x: &BlockQ5K, p: usize) -> u8 {
    let (j, i) = (p / 32, p % 32);
    let nibble = (x.qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 15;
    nibble | ((x.qh[i] >> j) & 1) << 4
}

impl KQuant for BlockQ5Kx8 {
    type File = Q5K;
    const SUB: usize = 32;
    const MINS: bool = true;
    const OFFSET: i32 = 0;
    /// As Q4_K's: one call of 5-8 tokens beat a 4-token call plus the rest.
    const WIDTH: usize = 8;

    fn put_row(&mut self, r: usize, x: &BlockQ5K) {
        self.d[r] = x.d;
        self.dmin[r] = x.dmin;
        for j in 0..8 {
            (self.scales[j][r], self.mins[j][r]) = get_scale_min_k4(j, &x.scales);
            let q = |m: usize| register_word(8 * j + m, |p| file_quant(x, p));
            for m in 0..4 {
                let nibbles = (q(m) & 0x0f0f_0f0f) | (q(m + 4) & 0x0f0f_0f0f) << 4;
                put_word(&mut self.lines[j][m], r, nibbles);
            }
            let fifth = (0..8).fold(0, |v, m| v | ((q(m) >> 4) & 0x0101_0101) << m);
            put_word(&mut self.lines[j][4], r, fifth);
        }
    }

    fn quant(&self, r: usize, p: usize) -> u8 {
        let (reg, byte) = (p / 4, 4 * r + p % 4);
        let (j, m) = (reg / 8, reg % 8);
        let nibble = (self.lines[j][m % 4].0[byte] >> (4 * (m / 4))) & 15;
        nibble | ((self.lines[j][4].0[byte] >> m) & 1) << 4
    }

    fn scale(&self, r: usize, s: usize) -> i32 {
        self.scales[s][r] as i32
    }

    fn min(&self, r: usize, s: usize) -> i32 {
        self.mins[s][r] as i32
    }

    fn d(&self) -> &[f16; GROUP] {
        &self.d
    }

    fn dmin(&self) -> &[f16; GROUP] {
        &self.dmin
    }

    kquant_kernels!(BlockQ5Kx8);
}

#[cfg(test)]
mod tests {
    #[test]
    fn put_row_places_every_quant_scale_and_min() {
        crate::kernels::packed::kquant::check_layout::<super::BlockQ5Kx8>(5);
    }
}
