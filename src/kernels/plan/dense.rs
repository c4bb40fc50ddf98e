//! The driver for weights used in place: per row block, a type's tile kernels over as many
//! tokens as whole tiles cover, then its dot kernel for every (row, token) they left.

use super::tasks::{task_rows, ROW_BLOCK_BYTES};
use crate::kernels::activations::{ActElem, QuantizedActivations};
use crate::kernels::types::{Dense, TileFn, TileSet, Tiles, TILE_TOKENS};
use crate::kernels::{KernelError, WeightMatrix};
use crate::parallel::Disjoint;
use crate::quant::blocks::{cast_blocks, Block};

/// A type's in-place kernels as the plan holds them, whatever their block and activation
/// types.
pub trait DenseRun: Sync {
    /// `out[t * rows + r] = dot(W[r], x[t])`; shapes and formats already checked by the plan.
    fn run(
        &self,
        w: &WeightMatrix,
        act: &QuantizedActivations,
        out: &mut [f32],
    ) -> Result<(), KernelError>;
}

impl<W: Block + Sync, A: ActElem> DenseRun for Dense<W, A> {
    fn run(
        &self,
        w: &WeightMatrix,
        act: &QuantizedActivations,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let blocks = cast_blocks(w.data).ok_or(KernelError::Misaligned(w.ty))?;
        let a = A::of(act).ok_or(KernelError::ActivationFormat {
            weight: w.ty,
            got: act.format(),
        })?;
        run(blocks, a, (w.rows, act.n_tokens(), w.k), out, self);
        Ok(())
    }
}

/// One tile kernel over rows `[b0, b1)` (whole tiles only) and tokens `[t, t + T)`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn tile_pass<W, A, const R: usize, const T: usize>(
    tile: TileFn<W, A, R, T>,
    w: &[W],
    a: &[A],
    nb: usize,
    rows: usize,
    (b0, b1): (usize, usize),
    t: usize,
    out: Disjoint<f32>,
) {
    let ar: [&[A]; T] = std::array::from_fn(|j| &a[(t + j) * nb..(t + j + 1) * nb]);
    let mut r = b0;
    while r + R <= b1 {
        let wr: [&[W]; R] = std::array::from_fn(|i| &w[(r + i) * nb..(r + i + 1) * nb]);
        // SAFETY: tiles come from the table of a backend's path, which the CPU supports,
        // and all rows have `nb` blocks.
        let v = unsafe { tile(wr, ar) };
        for (i, vr) in v.iter().enumerate() {
            for (j, &x) in vr.iter().enumerate() {
                // SAFETY: r + i < rows and t + j < n_tokens (callers pass whole tiles), so
                // the index is in bounds of the output; these rows belong to the caller's task.
                unsafe { out.write((t + j) * rows + r + i, x) };
            }
        }
        r += R;
    }
}

/// Every whole tile of rows `[b0, b1)` over as many tokens as tiles cover (8s, then a 4, then
/// a 2); returns that token count.
#[allow(clippy::too_many_arguments)]
#[inline]
fn tile_tokens<W, A, const R: usize>(
    tl: &Tiles<W, A, R>,
    w: &[W],
    a: &[A],
    nb: usize,
    rows: usize,
    n_tokens: usize,
    block: (usize, usize),
    out: Disjoint<f32>,
) -> usize {
    let mut t = 0;
    while t + TILE_TOKENS <= n_tokens {
        tile_pass(tl.mm, w, a, nb, rows, block, t, out);
        t += TILE_TOKENS;
    }
    if t + 4 <= n_tokens {
        tile_pass(tl.mm4, w, a, nb, rows, block, t, out);
        t += 4;
    }
    if t + 2 <= n_tokens {
        tile_pass(tl.mm2, w, a, nb, rows, block, t, out);
        t += 2;
    }
    t
}

/// `out[t * rows + r] = dot(w[r], a[t])` over `rows` weight rows and `n_tokens` token rows of
/// `k` elements, parallel over row chunks.
fn run<W: Sync, A: Sync>(
    w: &[W],
    a: &[A],
    (rows, n_tokens, k): (usize, usize, usize),
    out: &mut [f32],
    kernels: &Dense<W, A>,
) {
    let (dot, tiles) = (kernels.dot, &kernels.tiles);
    let nb = w.len() / rows;
    debug_assert_eq!(nb * n_tokens, a.len());
    let row_bytes = std::mem::size_of_val(w) / rows;
    let tile_rows = tiles.rows().max(1);
    let row_block = (ROW_BLOCK_BYTES / row_bytes.max(1)).next_multiple_of(tile_rows);

    let threads = crate::parallel::threads();
    let chunk = task_rows(rows, k * n_tokens, threads, tile_rows);
    let n_chunks = rows.div_ceil(chunk);
    let ptr = Disjoint::new(out);
    let wrow = |r: usize| &w[r * nb..(r + 1) * nb];
    let arow = |t: usize| &a[t * nb..(t + 1) * nb];

    let task = move |c: usize| {
        let r0 = c * chunk;
        let r1 = (r0 + chunk).min(rows);
        // Callers pass t < n_tokens and r < rows of this task.
        let put = |r: usize, t: usize, v: f32| {
            // SAFETY: the index is in bounds of `out` (len rows * n_tokens), and row r belongs
            // to this task only.
            unsafe { ptr.write(t * rows + r, v) }
        };
        for b0 in (r0..r1).step_by(row_block) {
            let b1 = (b0 + row_block).min(r1);
            let block = (b0, b1);
            let t = match tiles {
                TileSet::None => 0,
                TileSet::Rows1(tl) => tile_tokens(tl, w, a, nb, rows, n_tokens, block, ptr),
                TileSet::Rows2(tl) => tile_tokens(tl, w, a, nb, rows, n_tokens, block, ptr),
            };
            // Tokens [0, t) are done for rows [b0, r_mm).
            let r_mm = if t > 0 {
                b0 + (b1 - b0) / tile_rows * tile_rows
            } else {
                b0
            };
            // Whatever the tiles left (token and row tails; everything without tiles), one
            // by one.
            for r in b0..b1 {
                let wr = wrow(r);
                let from = if r >= r_mm { 0 } else { t };
                for tt in from..n_tokens {
                    // SAFETY: the dot comes from the table of a backend's path, which the CPU
                    // runs; both rows have `nb` blocks.
                    put(r, tt, unsafe { dot(wr, arow(tt)) });
                }
            }
        }
    };
    // Serial for one chunk or one thread.
    crate::parallel::for_each(n_chunks, task);
}
