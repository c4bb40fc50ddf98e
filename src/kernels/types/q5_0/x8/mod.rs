//! Q5_0 in 8-row groups: unsigned quants (0..=31) as nibble lines plus a high-bit line; the
//! file's offset of 16 is applied per block through the activations' `Q8Side`.
//!
//! Storage per (group, block), no bigger than the 8 original blocks (176 bytes):
//! - `qs`: 128 bytes, registers `k` and `k + 4` as low and high nibbles of the same 32 bytes;
//! - `qh`: 32 bytes, bit `k` of byte `i` is the 5th bit of register `k`'s byte `i`;
//! - `d`: the 8 rows' f16 scales.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use std::sync::Arc;

use half::f16;
use rayon::prelude::*;

use super::Q5_0;
use crate::kernels::activations::Q8Side;
use crate::kernels::cpu::CpuPath;
use crate::kernels::packed::{
    as_bytes, chunk_groups, dequantize_by_blocks, kernels_by_path, Layout, LayoutOf, Line32,
    PackedKernels, Release, Zeroed, GROUP,
};
use crate::quant::blocks::{cast_blocks, BlockQ5_0, BlockQ8_0};
use crate::quant::GgmlType;

pub(super) static LAYOUT: LayoutOf<Q5_0x8> = LayoutOf::new();

const SCALAR: PackedKernels<Q5_0x8> = PackedKernels::scalar(8);

impl Layout for Q5_0x8 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    type File = Q5_0;
    type Act = BlockQ8_0;

    fn shape(&self) -> (usize, usize, usize) {
        (self.rows, self.k, self.nb)
    }

    fn group_bytes(&self) -> usize {
        self.nb * 176
    }

    fn repack(data: &[u8], rows: usize, k: usize, done: &Release<'_>) -> Option<Q5_0x8> {
        let w: &[BlockQ5_0] = cast_blocks(data).filter(|w| w.len() == rows * (k / 32))?;
        Some(Q5_0x8::repack_blocks(w, rows, k, done))
    }

    fn from_mapped(
        rows: usize,
        k: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Q5_0x8> {
        let nb = k / 32;
        let n = rows.div_ceil(GROUP).checked_mul(nb)?;
        let [qs, qh, d] = offsets else {
            return None;
        };
        Some(Q5_0x8 {
            rows,
            k,
            nb,
            qs: Zeroed::mapped(map, *qs, n.checked_mul(4)?)?,
            qh: Zeroed::mapped(map, *qh, n)?,
            d: Zeroed::mapped(map, *d, n)?,
        })
    }

    fn arrays(&self) -> Vec<&[u8]> {
        vec![self.qs.bytes(), self.qh.bytes(), self.d.bytes()]
    }

    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        dequantize_by_blocks((self.nb, self.k), r, out, |g, b, rr, o| {
            self.dequantize(g, b, rr, o)
        })
    }

    fn scalar_group(
        &self,
        g: usize,
        a: &[&[BlockQ8_0]],
        sides: &[&[Q8Side]],
        out: &mut [[f32; GROUP]],
    ) {
        scalar_group(self, g, a, sides, out)
    }

    fn kernels(path: CpuPath) -> &'static PackedKernels<Q5_0x8> {
        kernels_by_path!(path, SCALAR)
    }
}

/// A Q5_0 matrix of `rows` × `k` repacked into 8-row groups.
pub struct Q5_0x8 {
    pub rows: usize,
    pub k: usize,
    /// Blocks per row (`k / 32`).
    pub nb: usize,
    /// `[group][block][4]` nibble lines.
    pub qs: Zeroed<Line32>,
    /// `[group][block]` high-bit lines.
    pub qh: Zeroed<Line32>,
    /// `[group][block][8]` row scales.
    pub d: Zeroed<[f16; GROUP]>,
}

impl std::fmt::Debug for Q5_0x8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Q5_0x8 {{ rows: {}, k: {} }}", self.rows, self.k)
    }
}

impl Q5_0x8 {
    /// Repacks `rows` rows of `w` (row-major, `k / 32` blocks per row), in parallel chunks of
    /// groups; `done` gets each chunk's source blocks once they are no longer needed.
    fn repack_blocks(w: &[BlockQ5_0], rows: usize, k: usize, done: &Release<'_>) -> Q5_0x8 {
        let nb = k / 32;
        assert_eq!(w.len(), rows * nb, "block count != rows x k/32");
        let groups = rows.div_ceil(GROUP);
        let mut qs = Zeroed::<Line32>::new(groups * nb * 4);
        let mut qh = Zeroed::<Line32>::new(groups * nb);
        let mut d = Zeroed::<[f16; GROUP]>::new(groups * nb);
        let cg = chunk_groups(nb * GROUP * std::mem::size_of::<BlockQ5_0>());
        qs.par_chunks_mut(cg * nb * 4)
            .zip(qh.par_chunks_mut(cg * nb))
            .zip(d.par_chunks_mut(cg * nb))
            .enumerate()
            .for_each(|(c, ((qs, qh), d))| {
                let (r0, r1) = (c * cg * GROUP, ((c + 1) * cg * GROUP).min(rows));
                for row in r0..r1 {
                    let (gl, r) = ((row - r0) / GROUP, row % GROUP);
                    for b in 0..nb {
                        let (x, gb) = (&w[row * nb + b], gl * nb + b);
                        d[gb][r] = x.d;
                        // Line m holds registers m (low nibbles: quants 4m..4m+4) and m + 4
                        // (high nibbles: quants 16+4m..), which is file bytes 4m..4m+4 as
                        // they are.
                        for (m, line) in qs[gb * 4..gb * 4 + 4].iter_mut().enumerate() {
                            line.0[4 * r..4 * r + 4].copy_from_slice(&x.qs[4 * m..4 * m + 4]);
                        }
                        qh[gb].0[4 * r..4 * r + 4].copy_from_slice(&high_bits(x.qh).to_le_bytes());
                    }
                }
                done(as_bytes(&w[r0 * nb..r1 * nb]));
            });
        Q5_0x8 {
            rows,
            k,
            nb,
            qs,
            qh,
            d,
        }
    }

    /// Quant `i` (0..32, unsigned 0..=31) of row `r` of group `g`, block `b`.
    #[inline]
    pub fn quant(&self, g: usize, b: usize, r: usize, i: usize) -> u8 {
        let gb = g * self.nb + b;
        let (reg, byte) = (i / 4, 4 * r + i % 4);
        let nib = (self.qs[gb * 4 + reg % 4].0[byte] >> (4 * (reg / 4))) & 15;
        let hi = (self.qh[gb].0[byte] >> reg) & 1;
        nib | hi << 4
    }
}

impl Q5_0x8 {
    /// Block `b` of row `r` of group `g` as f32.
    pub fn dequantize(&self, g: usize, b: usize, r: usize, out: &mut [f32]) {
        let d = self.d[g * self.nb + b][r].to_f32();
        for (i, o) in out.iter_mut().enumerate().take(32) {
            *o = (self.quant(g, b, r, i) as i32 - 16) as f32 * d;
        }
    }
}

/// A row's 4 bytes of the high-bit line from the file's 32 fifth bits (bit `i` for quant `i`):
/// bit `k` of byte `j` is the fifth bit of quant `4k + j` (register `k`'s byte `j`).
#[inline]
fn high_bits(qh: [u8; 4]) -> u32 {
    let bits = u32::from_le_bytes(qh);
    let mut word = 0;
    for k in 0..8 {
        // Quants 4k..4k+4, one bit per byte.
        let h = (bits >> (4 * k)) & 15;
        let spread = (h & 1) | (h & 2) << 7 | (h & 4) << 14 | (h & 8) << 21;
        word |= spread << k;
    }
    word
}

/// Scalar twin of the SIMD kernels: `out[t][r]` = row `r` of group `g` · token `t`, with
/// exactly the integer sums of the scalar dot per block.
fn scalar_group(
    w: &Q5_0x8,
    g: usize,
    a: &[&[BlockQ8_0]],
    sides: &[&[Q8Side]],
    out: &mut [[f32; GROUP]],
) {
    for ((y, s), o) in a.iter().zip(sides).zip(out.iter_mut()) {
        let mut acc = [0f32; GROUP];
        for b in 0..w.nb {
            let (yb, gb) = (&y[b], g * w.nb + b);
            let dy = yb.d.to_f32();
            for (r, acc) in acc.iter_mut().enumerate() {
                let mut sumi = 0i32;
                for i in 0..32 {
                    sumi += w.quant(g, b, r, i) as i32 * yb.qs[i] as i32;
                }
                let sumi = sumi - s[b].offset16;
                *acc += sumi as f32 * (w.d[gb][r].to_f32() * dy);
            }
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
impl Q5_0x8 {
    /// The prefetch of block `gb`'s quants, high bits and scales.
    #[inline(always)]
    fn prefetch_block(&self, gb: usize) {
        use crate::kernels::packed::prefetch::prefetch_ahead;
        prefetch_ahead(&self.qs[..], gb * 4, 4);
        prefetch_ahead(&self.qh[..], gb, 1);
        prefetch_ahead(&self.d[..], gb, 1);
    }
}
