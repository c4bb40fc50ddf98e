//! Q6_K in 8-row groups, one [`BlockQ6Kx8`] per (group, 256-quant block): 1696 bytes where the
//! file has 8 × 210 = 1680.
//!
//! Quants are stored unsigned (0..=63); the file's offset of 32 is applied per block through
//! the activations' 16-quant sums. Register `8j + m` (quants `32j + 4m..+4`) has its low 4 bits
//! in line `4j + m % 4` of `ql` (low nibble for `m < 4`, high for `m >= 4`) and its top 2 bits
//! at bits `2 (m % 4)` of line `2j + m / 4` of `qh`. Two registers' `vpmaddubsw` pairs fit an
//! i16 (2 · 2 · 63 · 127 < 2^15), so a 16-quant scale costs two `vpmaddwd`.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use half::f16;

use super::Q6K;
use crate::kernels::cpu::CpuPath;
use crate::kernels::packed::{
    kernels_by_path, GroupBlock, Grouped, LayoutOf, Line32, PackedKernels, Zeroable, GROUP,
};
use crate::quant::blocks::{BlockQ6K, BlockQ8K};
use crate::quant::types::QK_K;

/// A Q6_K matrix in 8-row groups.
pub type Q6Kx8 = Grouped<BlockQ6Kx8>;

pub(super) static LAYOUT: LayoutOf<Q6Kx8> = LayoutOf::new();

/// Widest call in tokens: at 6 the accumulators spill (5 tokens gained 10%, 6 lost 28%).
const WIDTH: usize = 5;

const SCALAR: PackedKernels<Q6Kx8> = PackedKernels::scalar(WIDTH);

/// One (8-row group, block column) of a repacked Q6_K matrix.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct BlockQ6Kx8 {
    /// `[16-quant chunk][row]` signed scales.
    pub scales: [[i8; GROUP]; 16],
    pub d: [f16; GROUP],
    /// Sub-block `j`'s lines in the order a kernel reads them: `ql` lines `4j..4j+4`, then
    /// `qh` lines `2j`, `2j+1` (see the module docs), so a block streams front to back: with
    /// separate `ql` and `qh` arrays a one-token matvec over a 90 MB matrix ran 2-4x slower.
    pub lines: [[Line32; 6]; 8],
}

// SAFETY: integers and f16 bit patterns only; every bit pattern is a valid value.
unsafe impl Zeroable for BlockQ6Kx8 {}

impl GroupBlock for BlockQ6Kx8 {
    type File = Q6K;

    /// Writes file block `x` as row `r`.
    fn put_row(&mut self, r: usize, x: &BlockQ6K) {
        self.d[r] = x.d;
        for (c, s) in x.scales.iter().enumerate() {
            self.scales[c][r] = *s;
        }
        // Four quants at a time. Sub-block j of the file: low 4 bits in a nibble of
        // `ql[64 (j/4) + 32 (j%2)..][..32]`, top 2 bits at bit 2 (j%4) of `qh[32 (j/4)..][..32]`.
        for j in 0..8 {
            let ql = &x.ql[64 * (j / 4) + 32 * (j % 2)..][..32];
            let qh = &x.qh[32 * (j / 4)..][..32];
            let (ls, hs) = (4 * ((j % 4) / 2), 2 * (j % 4));
            let low = |k: usize| (word(&ql[k..]) >> ls) & 0x0f0f_0f0f;
            let top = |k: usize| (word(&qh[k..]) >> hs) & 0x0303_0303;
            for mm in 0..4 {
                let v = low(4 * mm) | low(16 + 4 * mm) << 4;
                self.lines[j][mm].0[4 * r..4 * r + 4].copy_from_slice(&v.to_le_bytes());
            }
            for half in 0..2 {
                let v = (0..4).fold(0, |v, mm| v | top(16 * half + 4 * mm) << (2 * mm));
                self.lines[j][4 + half].0[4 * r..4 * r + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// Row `r` as f32.
    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let d = self.d[r].to_f32();
        for (p, o) in out.iter_mut().enumerate().take(QK_K) {
            let sc = self.scales[p / 16][r] as f32;
            *o = d * sc * (self.quant(r, p) as i32 - 32) as f32;
        }
    }

    /// Scalar twin of the SIMD kernels: row `r` · activation block `y`, with exactly the
    /// integer sums of the scalar dot.
    fn dot_row(&self, y: &BlockQ8K, r: usize) -> f32 {
        let x = self;
        let isum: i32 = (0..16)
            .map(|c| {
                let s: i32 = (16 * c..16 * c + 16)
                    .map(|p| (x.quant(r, p) as i32 - 32) * y.qs[p] as i32)
                    .sum();
                x.scales[c][r] as i32 * s
            })
            .sum();
        x.d[r].to_f32() * y.d * isum as f32
    }

    fn kernels(path: CpuPath) -> &'static PackedKernels<Q6Kx8> {
        kernels_by_path!(path, SCALAR)
    }
}

/// Four bytes as a little-endian word.
#[inline]
fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Quant `p` (0..256, unsigned 0..=63) of a file block.
#[cfg(test)]
fn file_quant(x: &BlockQ6K, p: usize) -> u8 {
    // Each half of 128 quants: four runs of 32 share the bytes `ql[l]`, `ql[l + 32]`, `qh[l]`.
    let (h, part, l) = (p / 128, (p % 128) / 32, p % 32);
    let ql = x.ql[64 * h + 32 * (part % 2) + l] >> (4 * (part / 2));
    let qh = x.qh[32 * h + l] >> (2 * part);
    (ql & 15) | (qh & 3) << 4
}

/// Where quant `p` of row `r` lives: (ql line, qh line, byte, nibble shift, 2-bit shift).
#[inline]
fn position(r: usize, p: usize) -> (usize, usize, usize, u32, u32) {
    let (reg, byte) = (p / 4, 4 * r + p % 4);
    let (j, m) = (reg / 8, reg % 8);
    let (mm, half) = (m % 4, m / 4);
    (
        4 * j + mm,
        2 * j + half,
        byte,
        4 * half as u32,
        2 * mm as u32,
    )
}

impl BlockQ6Kx8 {
    /// Quant `p` (0..256, unsigned 0..=63) of row `r`.
    #[inline]
    pub fn quant(&self, r: usize, p: usize) -> u8 {
        let (l, h, byte, ls, hs) = position(r, p);
        ((self.lines[l / 4][l % 4].0[byte] >> ls) & 15)
            | ((self.lines[h / 2][4 + h % 2].0[byte] >> hs) & 3) << 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-wise repack puts every quant where [`BlockQ6Kx8::quant`] reads it.
    #[test]
    fn put_places_every_quant() {
        crate::kernels::packed::check_put(
            11,
            |byte| BlockQ6K {
                ql: std::array::from_fn(|_| byte()),
                qh: std::array::from_fn(|_| byte()),
                scales: std::array::from_fn(|_| byte() as i8),
                d: f16::from_f32(0.5),
            },
            BlockQ6Kx8::put_row,
            BlockQ6Kx8::quant,
            file_quant,
        );
    }
}
