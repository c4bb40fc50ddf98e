//! Q3_K in 8-row groups, one [`BlockQ3Kx8`] per (group, 256-quant block): 928 bytes where the
//! file has 8 × 110 = 880. A generic K-quant layout ([`KQuant`]): unsigned quants `u = q + 4`
//! (0..=7, offset 4), a signed 6-bit scale per sub-block of 16.
//!
//! Sub-block `j` (32 quants) is 3 lines: lines 0 and 1 hold the low 2 bits of registers
//! `8j + m` (`m < 4`, line 0) and `8j + 4 + m` (line 1) at bits `2m..2m + 2`; line 2 has the
//! third bit of register `8j + m` at bit `m`.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use half::f16;

use super::Q3K;
use crate::kernels::packed::kquant::{kquant_kernels, put_word, register_word, KQuant};
use crate::kernels::packed::{Grouped, LayoutOf, Line32, Zeroable, GROUP};
use crate::quant::blocks::BlockQ3K;
use crate::quant::dequant::unpack_q3_k_scales;

/// A Q3_K matrix in 8-row groups.
pub type Q3Kx8 = Grouped<BlockQ3Kx8>;

pub(super) static LAYOUT: LayoutOf<Q3Kx8> = LayoutOf::new();

/// One (8-row group, block column) of a repacked Q3_K matrix.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct BlockQ3Kx8 {
    /// `[sub-block][row]` scales (-32..=31).
    pub scales: [[i8; GROUP]; 16],
    pub d: [f16; GROUP],
    /// Keeps the lines on 32-byte boundaries.
    pad: [u8; 16],
    /// `[32-quant sub-block][line]`, see the module docs.
    pub lines: [[Line32; 3]; 8],
}

// SAFETY: integers and f16 bit patterns only; every bit pattern is a valid value.
unsafe impl Zeroable for BlockQ3Kx8 {}

/// Quant `p` (0..256) of a file block as `q + 4` (0..=7).
fn file_quant(x: &BlockQ3K, p: usize) -> u8 {
    let (h, s, l) = (p / 128, (p % 128) / 32, p % 32);
    let low = (x.qs[32 * h + l] >> (2 * s)) & 3;
    low | ((x.hmask[l] >> (4 * h + s)) & 1) << 2
}

impl KQuant for BlockQ3Kx8 {
    type File = Q3K;
    const SUB: usize = 16;
    const MINS: bool = false;
    const OFFSET: i32 = 4;
    const WIDTH: usize = 8;

    fn put_row(&mut self, r: usize, x: &BlockQ3K) {
        self.d[r] = x.d;
        for (c, s) in unpack_q3_k_scales(&x.scales).into_iter().enumerate() {
            self.scales[c][r] = s;
        }
        for j in 0..8 {
            let q = |m: usize| register_word(8 * j + m, |p| file_quant(x, p));
            for half in 0..2 {
                let low = (0..4).fold(0, |v, m| v | (q(4 * half + m) & 0x0303_0303) << (2 * m));
                put_word(&mut self.lines[j][half], r, low);
            }
            let third = (0..8).fold(0, |v, m| v | ((q(m) >> 2) & 0x0101_0101) << m);
            put_word(&mut self.lines[j][2], r, third);
        }
    }

    fn quant(&self, r: usize, p: usize) -> u8 {
        let (reg, byte) = (p / 4, 4 * r + p % 4);
        let (j, m) = (reg / 8, reg % 8);
        let low = (self.lines[j][m / 4].0[byte] >> (2 * (m % 4))) & 3;
        low | ((self.lines[j][2].0[byte] >> m) & 1) << 2
    }

    fn scale(&self, r: usize, s: usize) -> i32 {
        self.scales[s][r] as i32
    }

    fn d(&self) -> &[f16; GROUP] {
        &self.d
    }

    kquant_kernels!(BlockQ3Kx8);
}

#[cfg(test)]
mod tests {
    #[test]
    fn put_row_places_every_quant_and_scale() {
        crate::kernels::packed::kquant::check_layout::<super::BlockQ3Kx8>(3);
    }
}
