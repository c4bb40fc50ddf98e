//! [`super::f32_gemm`] on 8 lanes: tiles of up to 6 rows × 16 columns of `C` held in 12
//! registers over the whole inner dimension (`B` vectors loaded once per tile row set, `A`
//! elements broadcast once per row); columns short of a vector by the scalar twin's formula.
//!
//! # Safety
//! [`f32_gemm`] requires AVX2 and FMA and a shape that fits its slices
//! ([`super::GemmShape::fits`]).

use std::arch::x86_64::*;

use super::{by_rows, for_each_tile, tail_columns, GemmShape, Strided, Tile};

const LANES: usize = 8;
const VECS: usize = 2;

/// See the module docs.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn f32_gemm(a: Strided, b: &[f32], c: &mut [f32], sh: GemmShape) {
    let whole = sh.n / LANES * LANES;
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        for_each_tile(&a, b, c, &sh, (whole, LANES, VECS), |t| {
            by_rows!(tile_rows, t.rows, t)
        });
    }
    tail_columns(&a, b, c, &sh, whole);
}

/// `R` rows of `C`, in the tile's vectors.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_rows<const R: usize>(t: &Tile) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        match t.vecs {
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
