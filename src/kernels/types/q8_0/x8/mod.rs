//! Q8_0 in 8-row groups: signed quants, 8 register lines per block (the kernel uses
//! |w| · sign(a, w), exact for every i8 weight), and the 8 rows' scales.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use std::sync::Arc;

use half::f16;
use rayon::prelude::*;

use super::Q8_0;
use crate::kernels::activations::Q8Side;
use crate::kernels::cpu::CpuPath;
use crate::kernels::packed::{
    as_bytes, chunk_groups, dequantize_by_blocks, kernels_by_path, Layout, LayoutOf, Line32,
    PackedKernels, Release, Zeroed, GROUP,
};
use crate::quant::blocks::{cast_blocks, BlockQ8_0};
use crate::quant::GgmlType;

pub(super) static LAYOUT: LayoutOf<Q8_0x8> = LayoutOf::new();

const SCALAR: PackedKernels<Q8_0x8> = PackedKernels::scalar(8);

impl Layout for Q8_0x8 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    type File = Q8_0;
    type Act = BlockQ8_0;

    fn shape(&self) -> (usize, usize, usize) {
        (self.rows, self.k, self.nb)
    }

    fn group_bytes(&self) -> usize {
        self.nb * 272
    }

    fn repack(data: &[u8], rows: usize, k: usize, done: &Release<'_>) -> Option<Q8_0x8> {
        let w: &[BlockQ8_0] = cast_blocks(data).filter(|w| w.len() == rows * (k / 32))?;
        Some(Q8_0x8::repack_blocks(w, rows, k, done))
    }

    fn from_mapped(
        rows: usize,
        k: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Q8_0x8> {
        let nb = k / 32;
        let n = rows.div_ceil(GROUP).checked_mul(nb)?;
        let [qs, d] = offsets else {
            return None;
        };
        Some(Q8_0x8 {
            rows,
            k,
            nb,
            qs: Zeroed::mapped(map, *qs, n.checked_mul(8)?)?,
            d: Zeroed::mapped(map, *d, n)?,
        })
    }

    fn arrays(&self) -> Vec<&[u8]> {
        vec![self.qs.bytes(), self.d.bytes()]
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
        _sides: &[&[Q8Side]],
        out: &mut [[f32; GROUP]],
    ) {
        scalar_group(self, g, a, out)
    }

    fn kernels(path: CpuPath) -> &'static PackedKernels<Q8_0x8> {
        kernels_by_path!(path, SCALAR)
    }
}

/// A Q8_0 matrix of `rows` × `k` repacked into 8-row groups.
pub struct Q8_0x8 {
    pub rows: usize,
    pub k: usize,
    pub nb: usize,
    /// `[group][block][8]` register lines (signed quants).
    pub qs: Zeroed<Line32>,
    /// `[group][block][8]` row scales.
    pub d: Zeroed<[f16; GROUP]>,
}

impl Q8_0x8 {
    /// Repacks `rows` rows of `w`; `done` is told each chunk's source bytes when they are finished with.
    fn repack_blocks(w: &[BlockQ8_0], rows: usize, k: usize, done: &Release<'_>) -> Q8_0x8 {
        let nb = k / 32;
        assert_eq!(w.len(), rows * nb, "block count != rows x k/32");
        let groups = rows.div_ceil(GROUP);
        let mut qs = Zeroed::<Line32>::new(groups * nb * 8);
        let mut d = Zeroed::<[f16; GROUP]>::new(groups * nb);
        let cg = chunk_groups(nb * GROUP * std::mem::size_of::<BlockQ8_0>());
        qs.par_chunks_mut(cg * nb * 8)
            .zip(d.par_chunks_mut(cg * nb))
            .enumerate()
            .for_each(|(c, (qs, d))| {
                let (r0, r1) = (c * cg * GROUP, ((c + 1) * cg * GROUP).min(rows));
                for row in r0..r1 {
                    let (gl, r) = ((row - r0) / GROUP, row % GROUP);
                    for b in 0..nb {
                        let (x, gb) = (&w[row * nb + b], gl * nb + b);
                        d[gb][r] = x.d;
                        let q = x.qs.map(|v| v as u8);
                        for (reg, src) in q.chunks_exact(4).enumerate() {
                            qs[gb * 8 + reg].0[4 * r..4 * r + 4].copy_from_slice(src);
                        }
                    }
                }
                done(as_bytes(&w[r0 * nb..r1 * nb]));
            });
        Q8_0x8 { rows, k, nb, qs, d }
    }

    /// Quant `i` (0..32) of row `r` of group `g`, block `b`.
    #[inline]
    pub fn quant(&self, g: usize, b: usize, r: usize, i: usize) -> i8 {
        self.qs[(g * self.nb + b) * 8 + i / 4].0[4 * r + i % 4] as i8
    }

    /// Block `b` of row `r` of group `g` as f32.
    pub fn dequantize(&self, g: usize, b: usize, r: usize, out: &mut [f32]) {
        let d = self.d[g * self.nb + b][r].to_f32();
        for (i, o) in out.iter_mut().enumerate().take(32) {
            *o = self.quant(g, b, r, i) as f32 * d;
        }
    }
}

/// Scalar twin of the SIMD kernels: `out[t][r]` = row `r` of group `g` · token `t`, with
/// exactly the integer sums of the scalar dot per block.
fn scalar_group(w: &Q8_0x8, g: usize, a: &[&[BlockQ8_0]], out: &mut [[f32; GROUP]]) {
    for (y, o) in a.iter().zip(out.iter_mut()) {
        let mut acc = [0f32; GROUP];
        for (b, yb) in y.iter().enumerate().take(w.nb) {
            let gb = g * w.nb + b;
            for (r, acc) in acc.iter_mut().enumerate() {
                let sumi: i32 = (0..32)
                    .map(|i| w.quant(g, b, r, i) as i32 * yb.qs[i] as i32)
                    .sum();
                *acc += sumi as f32 * (w.d[gb][r].to_f32() * yb.d.to_f32());
            }
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
impl Q8_0x8 {
    /// The prefetch of block `gb`'s quants and scales.
    #[inline(always)]
    fn prefetch_block(&self, gb: usize) {
        use crate::kernels::packed::prefetch::prefetch_ahead;
        prefetch_ahead(&self.qs[..], gb * 8, 8);
        prefetch_ahead(&self.d[..], gb, 1);
    }
}
