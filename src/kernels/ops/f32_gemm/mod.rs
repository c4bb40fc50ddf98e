//! Small f32 matrix products for attention tiles: `C (+)= A · B` with `B` row-major and `A`
//! read element by element through two strides, so a transposed `A` costs nothing. Every
//! element of `C` is one fused multiply-add per term, in order of the inner index, starting
//! from 0 or from `C`: each SIMD path gives the scalar twin's bits.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "aarch64")]
pub mod neon;

/// The left matrix of a product: element (i, p) at `data[i * row + p * step]`.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    pub data: &'a [f32],
    pub row: usize,
    pub step: usize,
}

/// One product's sizes: `C` is `m × n` with row `i` at `c[i * ldc..]`, the inner dimension is
/// `k`, row `p` of `B` is at `b[p * ldb..]`; `accumulate` adds to `C` instead of overwriting.
#[derive(Clone, Copy, Debug)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub accumulate: bool,
}

impl GemmShape {
    /// Whether the three matrices lie inside their slices (and rows of `C` do not overlap).
    pub fn fits(&self, a: &Strided, b_len: usize, c_len: usize) -> bool {
        let last = |rows: usize, stride: usize, len: usize| {
            rows.checked_sub(1)
                .and_then(|r| r.checked_mul(stride))
                .and_then(|x| x.checked_add(len))
        };
        if self.m == 0 || self.n == 0 {
            return true;
        }
        let a_ok = self.k == 0
            || last(self.m, a.row, 1)
                .zip(last(self.k, a.step, 0))
                .and_then(|(x, y)| x.checked_add(y))
                .is_some_and(|end| end <= a.data.len());
        let b_ok = self.k == 0 || last(self.k, self.ldb, self.n).is_some_and(|e| e <= b_len);
        let c_ok = (self.m == 1 || self.n <= self.ldc)
            && last(self.m, self.ldc, self.n).is_some_and(|e| e <= c_len);
        a_ok && b_ok && c_ok
    }
}

/// The scalar twin.
pub fn f32_gemm(a: Strided, b: &[f32], c: &mut [f32], sh: GemmShape) {
    for i in 0..sh.m {
        for j in 0..sh.n {
            c[i * sh.ldc + j] = element(&a, b, c, &sh, i, j);
        }
    }
}

/// `C[i][j]` as every path computes it (the SIMD paths' column tails call it too).
#[inline(always)]
fn element(a: &Strided, b: &[f32], c: &[f32], sh: &GemmShape, i: usize, j: usize) -> f32 {
    let mut acc = if sh.accumulate {
        c[i * sh.ldc + j]
    } else {
        0.0
    };
    for p in 0..sh.k {
        acc = a.data[i * a.row + p * a.step].mul_add(b[p * sh.ldb + j], acc);
    }
    acc
}

/// Columns `j0..n` of every row by [`element`]: the tail a SIMD path's vectors do not cover.
#[inline(always)]
fn tail_columns(a: &Strided, b: &[f32], c: &mut [f32], sh: &GemmShape, j0: usize) {
    for i in 0..sh.m {
        for j in j0..sh.n {
            c[i * sh.ldc + j] = element(a, b, c, sh, i, j);
        }
    }
}

/// Most rows of `C` per SIMD tile (its accumulators stay in registers over the whole inner
/// dimension).
const TILE_ROWS: usize = 6;

/// One SIMD tile of a product: `a` at its first row, `b` and `c` at its first column.
struct Tile {
    a: *const f32,
    row: usize,
    step: usize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    k: usize,
    accumulate: bool,
    /// Rows of `C` in the tile (1..=[`TILE_ROWS`]), vectors across, lanes of the last one.
    rows: usize,
    vecs: usize,
    last_lanes: usize,
}

/// Walks columns `0..cols` of `C` in tiles of up to [`TILE_ROWS`] rows × `max_vecs` vectors of
/// `lanes`, calling `tile` on each (the last vector of a column run may be partial).
///
/// # Safety
/// The shape must fit the slices ([`GemmShape::fits`]) and `cols <= sh.n`.
unsafe fn for_each_tile(
    a: &Strided,
    b: &[f32],
    c: &mut [f32],
    sh: &GemmShape,
    (cols, lanes, max_vecs): (usize, usize, usize),
    mut tile: impl FnMut(&Tile),
) {
    for j in (0..cols).step_by(lanes * max_vecs) {
        let width = (cols - j).min(lanes * max_vecs);
        let vecs = width.div_ceil(lanes);
        for i in (0..sh.m).step_by(TILE_ROWS) {
            // SAFETY: row i < m and column j < n lie inside the slices (the caller's promise).
            let t = unsafe {
                Tile {
                    a: a.data.as_ptr().add(i * a.row),
                    row: a.row,
                    step: a.step,
                    b: b.as_ptr().add(j),
                    ldb: sh.ldb,
                    c: c.as_mut_ptr().add(i * sh.ldc + j),
                    ldc: sh.ldc,
                    k: sh.k,
                    accumulate: sh.accumulate,
                    rows: (sh.m - i).min(TILE_ROWS),
                    vecs,
                    last_lanes: width - lanes * (vecs - 1),
                }
            };
            tile(&t);
        }
    }
}

/// Calls `$f::<R>(args)` for the runtime row count `$rows` (1..=6) of a tile.
macro_rules! by_rows {
    ($f:ident, $rows:expr, $($arg:expr),*) => {
        match $rows {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            _ => $f::<6>($($arg),*),
        }
    };
}
#[allow(unused_imports)]
use by_rows;

#[cfg(test)]
mod tests;
