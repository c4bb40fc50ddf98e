//! Q4_K in 8-row groups, one [`BlockQ4Kx8`] per (group, 256-quant block): 1184 bytes where the
//! file has 8 × 144 = 1152.
//!
//! Quants stay unsigned (0..=15). Sub-block `j` (quants `32j..32j+32`) is registers
//! `8j..8j+8`; register `8j + m` is the low nibble (`m < 4`) or high nibble (`m >= 4`) of line
//! `4j + m % 4`. A kernel sums the 8 registers' `vpmaddubsw` pairs in i16 (8 · 2 · 15 · 127 <
//! 2^15, exact) and applies the sub-block scale with one `vpmaddwd`; the mins go through the
//! activations' 16-quant sums, as in the in-place kernel.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use half::f16;

use super::Q4K;
use crate::kernels::cpu::CpuPath;
use crate::kernels::packed::{
    kernels_by_path, GroupBlock, Grouped, LayoutOf, Line32, PackedKernels, Zeroable, GROUP,
};
use crate::quant::blocks::{BlockQ4K, BlockQ8K};
use crate::quant::dequant_k::get_scale_min_k4;
use crate::quant::types::QK_K;

/// A Q4_K matrix in 8-row groups.
pub type Q4Kx8 = Grouped<BlockQ4Kx8>;

pub(super) static LAYOUT: LayoutOf<Q4Kx8> = LayoutOf::new();

/// Widest call in tokens: one call of 5-8 tokens beat a 4-token call plus the rest.
const WIDTH: usize = 8;

const SCALAR: PackedKernels<Q4Kx8> = PackedKernels::scalar(WIDTH);

/// One (8-row group, block column) of a repacked Q4_K matrix.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct BlockQ4Kx8 {
    /// `[sub-block][row]` 6-bit scales.
    pub scales: [[u8; GROUP]; 8],
    /// `[sub-block][row]` 6-bit mins.
    pub mins: [[u8; GROUP]; 8],
    pub d: [f16; GROUP],
    pub dmin: [f16; GROUP],
    /// Nibble lines, see the module docs; after the scales, so a kernel reads the block front
    /// to back (as Q6_K, where that order measured 2-4x faster on matrices beyond the caches).
    pub qs: [Line32; 32],
}

// SAFETY: integers and f16 bit patterns only; every bit pattern is a valid value.
unsafe impl Zeroable for BlockQ4Kx8 {}

impl GroupBlock for BlockQ4Kx8 {
    type File = Q4K;

    /// Writes file block `x` as row `r`.
    fn put_row(&mut self, r: usize, x: &BlockQ4K) {
        self.d[r] = x.d;
        self.dmin[r] = x.dmin;
        for j in 0..8 {
            (self.scales[j][r], self.mins[j][r]) = get_scale_min_k4(j, &x.scales);
        }
        // Four quants at a time: sub-block j's quants 4m..4m+4 (low nibbles of line 4j + m)
        // and 16+4m..16+4m+4 (high nibbles), from the file's nibbles of sub-block j.
        for j in 0..8 {
            let src = &x.qs[32 * (j / 2)..32 * (j / 2) + 32];
            let shift = 4 * (j % 2);
            let nibbles = |at: usize| (word(&src[at..]) >> shift) & 0x0f0f_0f0f;
            for m in 0..4 {
                let v = nibbles(4 * m) | nibbles(16 + 4 * m) << 4;
                self.qs[4 * j + m].0[4 * r..4 * r + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// Row `r` as f32.
    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let (d, dmin) = (self.d[r].to_f32(), self.dmin[r].to_f32());
        for (p, o) in out.iter_mut().enumerate().take(QK_K) {
            let j = p / 32;
            let (sc, m) = (self.scales[j][r] as f32, self.mins[j][r] as f32);
            *o = d * sc * self.quant(r, p) as f32 - dmin * m;
        }
    }

    /// Scalar twin of the SIMD kernels: row `r` · activation block `y`, with exactly the
    /// integer sums of the scalar dot.
    fn dot_row(&self, y: &BlockQ8K, r: usize) -> f32 {
        let x = self;
        let mut isum = 0i32;
        for j in 0..8 {
            let s: i32 = (32 * j..32 * j + 32)
                .map(|p| x.quant(r, p) as i32 * y.qs[p] as i32)
                .sum();
            isum += x.scales[j][r] as i32 * s;
        }
        let summ: i32 = (0..16)
            .map(|c| y.bsums[c] as i32 * x.mins[c / 2][r] as i32)
            .sum();
        x.d[r].to_f32() * y.d * isum as f32 - x.dmin[r].to_f32() * y.d * summ as f32
    }

    fn kernels(path: CpuPath) -> &'static PackedKernels<Q4Kx8> {
        kernels_by_path!(path, SCALAR)
    }
}

/// Four bytes as a little-endian word.
#[inline]
fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Quant `p` (0..256, unsigned) of a file block.
#[cfg(test)]
fn file_quant(x: &BlockQ4K, p: usize) -> u8 {
    let (s, i) = (p / 32, p % 32);
    let byte = x.qs[32 * (s / 2) + i];
    if s % 2 == 0 {
        byte & 15
    } else {
        byte >> 4
    }
}

/// Line and bit shift of quant `p` of row `r`: (line, byte, shift).
#[inline]
fn position(r: usize, p: usize) -> (usize, usize, u32) {
    let (reg, byte) = (p / 4, 4 * r + p % 4);
    let (j, m) = (reg / 8, reg % 8);
    (4 * j + m % 4, byte, 4 * (m / 4) as u32)
}

impl BlockQ4Kx8 {
    /// Quant `p` (0..256, unsigned) of row `r`.
    #[inline]
    pub fn quant(&self, r: usize, p: usize) -> u8 {
        let (line, byte, shift) = position(r, p);
        (self.qs[line].0[byte] >> shift) & 15
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-wise repack puts every quant where [`BlockQ4Kx8::quant`] reads it.
    #[test]
    fn put_places_every_quant() {
        crate::kernels::packed::check_put(
            7,
            |byte| BlockQ4K {
                d: f16::from_f32(0.5),
                dmin: f16::from_f32(0.25),
                scales: std::array::from_fn(|_| byte()),
                qs: std::array::from_fn(|_| byte()),
            },
            BlockQ4Kx8::put_row,
            BlockQ4Kx8::quant,
            file_quant,
        );
    }
}
