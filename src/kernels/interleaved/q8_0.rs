//! Q8_0 in 8-row groups: signed quants, 8 register lines per block (the kernel uses
//! |w| · sign(a, w), exact for every i8 weight), and the 8 rows' scales.

use half::f16;
use rayon::prelude::*;

use super::{as_bytes, chunk_groups, Line32, Release, Zeroed, GROUP};
use crate::quant::blocks::BlockQ8_0;

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
    /// Repacks `rows` rows of `w`; `done` as for [`super::Q5_0x8::repack`].
    pub fn repack(w: &[BlockQ8_0], rows: usize, k: usize, done: &Release<'_>) -> Q8_0x8 {
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
/// exactly the integer sums of [`crate::kernels::scalar::vec_dot_q8_0_q8_0`] per block.
pub fn q8_0x8_group(w: &Q8_0x8, g: usize, a: &[&[BlockQ8_0]], out: &mut [[f32; GROUP]]) {
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
