//! The K-quants' layout shape: one struct per (8-row group, 256-quant block column), big
//! enough to keep a group's block together.

use std::sync::Arc;

use rayon::prelude::*;

use super::{as_bytes, chunk_groups, Release, Zeroable, Zeroed, GROUP};

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
    pub(crate) fn scalar_group<Y>(
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
