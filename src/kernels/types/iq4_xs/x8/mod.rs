//! IQ4_XS in 8-row groups, one [`BlockIQ4XSx8`] per (group, 256-quant block): 1120 bytes where
//! the file has 8 × 136 = 1088. A generic K-quant layout ([`KQuant`]): the codebook indices
//! stay nibbles (lines as Q4_K's), the kernels look the values up with a byte shuffle; a
//! signed 6-bit scale per sub-block of 32. The scalar twin reads `value + 128` (unsigned,
//! offset 128), as the AVX-512 kernel does.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use half::f16;

use super::IQ4XS;
use crate::kernels::packed::kquant::{kquant_kernels, put_word, register_word, KQuant};
use crate::kernels::packed::{Grouped, LayoutOf, Line32, Zeroable, GROUP};
use crate::quant::blocks::{BlockIQ4XS, KVALUES_IQ4NL};
use crate::quant::dequant::iq4_xs_scale;

/// An IQ4_XS matrix in 8-row groups.
pub type IQ4XSx8 = Grouped<BlockIQ4XSx8>;

pub(super) static LAYOUT: LayoutOf<IQ4XSx8> = LayoutOf::new();

/// One (8-row group, block column) of a repacked IQ4_XS matrix.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct BlockIQ4XSx8 {
    /// `[sub-block][row]` scales (-32..=31).
    pub scales: [[i8; GROUP]; 8],
    pub d: [f16; GROUP],
    /// Keeps the lines on 32-byte boundaries.
    pad: [u8; 16],
    /// `[sub-block][line]` codebook indices: register `8j + m` in the low (`m < 4`) or high
    /// nibbles of line `m % 4` of sub-block `j`.
    pub lines: [[Line32; 4]; 8],
}

// SAFETY: integers and f16 bit patterns only; every bit pattern is a valid value.
unsafe impl Zeroable for BlockIQ4XSx8 {}

/// The codebook index of quant `p` (0..256) of a file block.
fn file_index(x: &BlockIQ4XS, p: usize) -> u8 {
    let (j, i) = (p / 32, p % 32);
    (x.qs[16 * j + i % 16] >> (4 * (i / 16))) & 15
}

impl BlockIQ4XSx8 {
    /// The codebook index of quant `p` of row `r`.
    fn index(&self, r: usize, p: usize) -> u8 {
        let (reg, byte) = (p / 4, 4 * r + p % 4);
        let (j, m) = (reg / 8, reg % 8);
        (self.lines[j][m % 4].0[byte] >> (4 * (m / 4))) & 15
    }
}

impl KQuant for BlockIQ4XSx8 {
    type File = IQ4XS;
    const SUB: usize = 32;
    const MINS: bool = false;
    const OFFSET: i32 = 128;
    const WIDTH: usize = 8;

    fn put_row(&mut self, r: usize, x: &BlockIQ4XS) {
        self.d[r] = x.d;
        for j in 0..8 {
            self.scales[j][r] = iq4_xs_scale(x, j) as i8;
            let q = |m: usize| register_word(8 * j + m, |p| file_index(x, p));
            for m in 0..4 {
                put_word(&mut self.lines[j][m], r, q(m) | q(m + 4) << 4);
            }
        }
    }

    fn quant(&self, r: usize, p: usize) -> u8 {
        (KVALUES_IQ4NL[self.index(r, p) as usize] as i32 + 128) as u8
    }

    fn scale(&self, r: usize, s: usize) -> i32 {
        self.scales[s][r] as i32
    }

    fn d(&self) -> &[f16; GROUP] {
        &self.d
    }

    kquant_kernels!(BlockIQ4XSx8);
}

#[cfg(test)]
mod tests {
    #[test]
    fn put_row_places_every_quant_and_scale() {
        crate::kernels::packed::kquant::check_layout::<super::BlockIQ4XSx8>(4);
    }
}
