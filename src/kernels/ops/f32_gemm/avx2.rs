//! [`super::f32_gemm`] on 8 lanes: tiles of up to 6 rows × 16 columns of `C` held in 12
//! registers over the whole inner dimension (`B` vectors loaded once per tile row set, `A`
//! elements broadcast once per row); columns short of a vector by the scalar twin's formula.
//!
//! # Safety
//! [`f32_gemm`] requires AVX2 and FMA and a shape that fits its slices
//! ([`super::GemmShape::fits`]).

use std::arch::x86_64::*;

use super::{by_rows, tail_columns, GemmShape, Strided};

const ROWS: usize = 6;
const LANES: usize = 8;
const VECS: usize = 2;

/// One tile's pointers: `a` at its first row, `b` and `c` at its first column.
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
}

/// See the module docs.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn f32_gemm(a: Strided, b: &[f32], c: &mut [f32], sh: GemmShape) {
    let whole = sh.n / LANES * LANES;
    // SAFETY: this function's `# Safety` contract, which the caller upholds: every tile lies
    // inside the slices.
    unsafe {
        for j in (0..whole).step_by(LANES * VECS) {
            let vecs = ((whole - j) / LANES).min(VECS);
            for i in (0..sh.m).step_by(ROWS) {
                let t = Tile {
                    a: a.data.as_ptr().add(i * a.row),
                    row: a.row,
                    step: a.step,
                    b: b.as_ptr().add(j),
                    ldb: sh.ldb,
                    c: c.as_mut_ptr().add(i * sh.ldc + j),
                    ldc: sh.ldc,
                    k: sh.k,
                    accumulate: sh.accumulate,
                };
                by_rows!(tile_rows, (sh.m - i).min(ROWS), &t, vecs);
            }
        }
    }
    tail_columns(&a, b, c, &sh, whole);
}

/// `R` rows × `vecs` vectors of `C`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_rows<const R: usize>(t: &Tile, vecs: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        match vecs {
            1 => tile::<R, 1>(t),
            _ => tile::<R, 2>(t),
        }
    }
}

/// `R` rows × `V` vectors of `C`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const R: usize, const V: usize>(t: &Tile) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); V]; R];
        if t.accumulate {
            for (r, acc) in acc.iter_mut().enumerate() {
                for (v, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm256_loadu_ps(t.c.add(r * t.ldc + LANES * v));
                }
            }
        }
        for p in 0..t.k {
            let bp = t.b.add(p * t.ldb);
            let bv = each!(V, _mm256_setzero_ps(), |v| _mm256_loadu_ps(
                bp.add(LANES * v)
            ));
            let ap = t.a.add(p * t.step);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm256_set1_ps(*ap.add(r * t.row));
                for (acc, bv) in acc.iter_mut().zip(&bv) {
                    *acc = _mm256_fmadd_ps(av, *bv, *acc);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, acc) in acc.iter().enumerate() {
                _mm256_storeu_ps(t.c.add(r * t.ldc + LANES * v), *acc);
            }
        }
    }
}
