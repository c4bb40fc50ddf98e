//! The K-quants' layout shape: one struct per (8-row group, 256-quant block column), big
//! enough to keep a group's block together.

use std::sync::Arc;

use rayon::prelude::*;

use super::{
    as_bytes, chunk_groups, dequantize_by_blocks, Layout, PackedKernels, Release, Side, Zeroable,
    Zeroed, GROUP,
};
use crate::kernels::cpu::CpuPath;
use crate::kernels::types::WeightType;
use crate::quant::blocks::cast_blocks;
use crate::quant::GgmlType;

/// One (group, block column) of a K-quant layout: how a file block goes in, the scalar twin's
/// per-row dot, and the kernels. [`Grouped`] of it is then a [`Layout`].
pub(crate) trait GroupBlock: Zeroable + Send + Sync + 'static {
    /// The weight type whose blocks it holds.
    type File: WeightType;
    /// Writes file block `x` as row `r`.
    fn put_row(&mut self, r: usize, x: &<Self::File as WeightType>::Block);
    /// Row `r` as f32.
    fn dequantize_row(&self, r: usize, out: &mut [f32]);
    /// Row `r` · activation block `y`, with exactly the integer sums of the type's scalar dot.
    fn dot_row(&self, y: &<Self::File as WeightType>::Act, r: usize) -> f32;
    /// The kernels on `path`.
    fn kernels(path: CpuPath) -> &'static PackedKernels<Grouped<Self>>;
}

impl<S: GroupBlock> Layout for Grouped<S> {
    const TYPE: GgmlType = S::File::TYPE;
    type File = S::File;
    type Act = <S::File as WeightType>::Act;

    fn shape(&self) -> (usize, usize, usize) {
        (self.rows, self.k, self.nb)
    }

    fn group_bytes(&self) -> usize {
        self.nb * std::mem::size_of::<S>()
    }

    fn repack(data: &[u8], rows: usize, k: usize, done: &Release<'_>) -> Option<Self> {
        let nb = k / S::File::BLOCK_LEN;
        let w: &[<S::File as WeightType>::Block] =
            cast_blocks(data).filter(|w| w.len() == rows * nb)?;
        Some(Grouped::repack(w, rows, k, nb, done, S::put_row))
    }

    fn from_mapped(
        rows: usize,
        k: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Self> {
        Grouped::mapped(rows, k, k / S::File::BLOCK_LEN, map, offsets)
    }

    fn arrays(&self) -> Vec<&[u8]> {
        vec![self.blocks.bytes()]
    }

    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        dequantize_by_blocks((self.nb, self.k), r, out, |g, b, rr, o| {
            self.block(g, b).dequantize_row(rr, o)
        })
    }

    fn scalar_group(
        &self,
        g: usize,
        a: &[&[Self::Act]],
        _sides: &[&[Side<Self>]],
        out: &mut [[f32; GROUP]],
    ) {
        self.scalar_rows(g, a, out, S::dot_row)
    }

    fn kernels(path: CpuPath) -> &'static PackedKernels<Self> {
        S::kernels(path)
    }
}

/// A matrix of `rows` × `k` stored as one `S` per (8-row group, block column).
pub struct Grouped<S> {
    pub rows: usize,
    pub k: usize,
    /// Blocks per row.
    pub nb: usize,
    /// `[group][block]`.
    pub blocks: Zeroed<S>,
}

impl<S: Zeroable + Send + Sync> Grouped<S> {
    /// Repacks `rows` rows of `w` (row-major, `nb` blocks per row) by `put(&mut dst, r, src)`
    /// into zeroed group blocks, in parallel chunks of about 256 KiB of source; `done` gets
    /// each chunk's source blocks once they are no longer needed.
    pub(crate) fn repack<B: Sync>(
        w: &[B],
        rows: usize,
        k: usize,
        nb: usize,
        done: &Release<'_>,
        put: impl Fn(&mut S, usize, &B) + Sync,
    ) -> Grouped<S> {
        assert_eq!(w.len(), rows * nb, "block count != rows x blocks per row");
        let mut blocks = Zeroed::<S>::new(rows.div_ceil(GROUP) * nb);
        let cg = chunk_groups(nb * GROUP * std::mem::size_of::<B>());
        blocks
            .par_chunks_mut(cg * nb)
            .enumerate()
            .for_each(|(c, dst)| {
                let (r0, r1) = (c * cg * GROUP, ((c + 1) * cg * GROUP).min(rows));
                for row in r0..r1 {
                    let (gl, r) = ((row - r0) / GROUP, row % GROUP);
                    for b in 0..nb {
                        put(&mut dst[gl * nb + b], r, &w[row * nb + b]);
                    }
                }
                done(as_bytes(&w[r0 * nb..r1 * nb]));
            });
        Grouped {
            rows,
            k,
            nb,
            blocks,
        }
    }

    /// The matrix over one array at `offsets[0]` of `map` (see `Layout::from_mapped`).
    pub(crate) fn mapped(
        rows: usize,
        k: usize,
        nb: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Grouped<S>> {
        let n = rows.div_ceil(GROUP).checked_mul(nb)?;
        match offsets {
            [at] => Some(Grouped {
                rows,
                k,
                nb,
                blocks: Zeroed::mapped(map, *at, n)?,
            }),
            _ => None,
        }
    }

    /// Block column `b` of group `g`.
    #[inline]
    pub fn block(&self, g: usize, b: usize) -> &S {
        &self.blocks[g * self.nb + b]
    }

    /// The scalar twins' loop: `out[t][r]` = the sum over blocks of `dot(block, a[t]'s block,
    /// r)`, accumulated in block order as the in-place scalar kernels do.
    fn scalar_rows<Y>(
        &self,
        g: usize,
        a: &[&[Y]],
        out: &mut [[f32; GROUP]],
        dot: impl Fn(&S, &Y, usize) -> f32,
    ) {
        for (y, o) in a.iter().zip(out.iter_mut()) {
            let mut acc = [0f32; GROUP];
            for (b, yb) in y.iter().enumerate().take(self.nb) {
                let x = self.block(g, b);
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc += dot(x, yb, r);
                }
            }
            *o = acc;
        }
    }
}
