//! [`super::f32_gemm`] on 16 lanes: tiles of up to 6 rows × 64 columns of `C` held in 24
//! registers over the whole inner dimension, each `B` vector loaded once for all the tile's
//! rows and each `A` element broadcast once for all its vectors; masked lanes take a partial
//! last vector.
//!
//! # Safety
//! [`f32_gemm`] requires the AVX-512 path's features and a shape that fits its slices
//! ([`super::GemmShape::fits`]).

use std::arch::x86_64::*;

use super::{by_rows, for_each_tile, GemmShape, Strided, Tile};
use crate::kernels::simd::avx512::tf;

const LANES: usize = 16;
const VECS: usize = 4;

tf! {
/// See the module docs.
pub unsafe fn f32_gemm(a: Strided, b: &[f32], c: &mut [f32], sh: GemmShape) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        for_each_tile(&a, b, c, &sh, (sh.n, LANES, VECS), |t| {
            by_rows!(tile_rows, t.rows, t)
        });
    }
}

/// `R` rows of `C`, in the tile's vectors.
#[inline]
unsafe fn tile_rows<const R: usize>(t: &Tile) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        match t.vecs {
            1 => tile::<R, 1>(t),
            2 => tile::<R, 2>(t),
            3 => tile::<R, 3>(t),
            _ => tile::<R, 4>(t),
        }
    }
}

/// `R` rows × `V` vectors of `C`.
#[inline]
unsafe fn tile<const R: usize, const V: usize>(t: &Tile) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let last = (u32::MAX >> (32 - t.last_lanes)) as __mmask16;
        let mask = |v: usize| if v + 1 == V { last } else { !0 };
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        if t.accumulate {
            for (r, acc) in acc.iter_mut().enumerate() {
                for (v, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm512_maskz_loadu_ps(mask(v), t.c.add(r * t.ldc + LANES * v));
                }
            }
        }
        for p in 0..t.k {
            let bp = t.b.add(p * t.ldb);
            let bv = each!(V, _mm512_setzero_ps(), |v| _mm512_maskz_loadu_ps(
                mask(v),
                bp.add(LANES * v)
            ));
            let ap = t.a.add(p * t.step);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(r * t.row));
                for (acc, bv) in acc.iter_mut().zip(&bv) {
                    *acc = _mm512_fmadd_ps(av, *bv, *acc);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, acc) in acc.iter().enumerate() {
                _mm512_mask_storeu_ps(t.c.add(r * t.ldc + LANES * v), mask(v), *acc);
            }
        }
    }
}
}
