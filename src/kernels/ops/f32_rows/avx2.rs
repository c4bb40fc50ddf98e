//! AVX2 versions of the [`super`] row operations.
//!
//! # Safety
//! Every `pub unsafe fn` here requires AVX2, FMA and F16C, and the shapes the backend checks.

use std::arch::x86_64::*;

use crate::kernels::simd::avx2::hsum_ps;

/// [`super::f32_dots`] for `G <= 4` queries, two rows at a time: each 8-float slice of a
/// query is loaded once for both rows, and each row slice once for all `G` queries.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_dots_g<const G: usize>(q: &[f32], rows: &[f32], out: &mut [f32], stride: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let d = q.len() / G;
        let n = rows.len() / d.max(1);
        let mut j = 0;
        while j + 2 <= n {
            dots_rows::<G, 2>(q, d, &rows[j * d..(j + 2) * d], out, stride, j);
            j += 2;
        }
        if j < n {
            dots_rows::<G, 1>(q, d, &rows[j * d..(j + 1) * d], out, stride, j);
        }
    }
}

/// `R` rows (starting at row `j0`) of [`f32_dots_g`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dots_rows<const G: usize, const R: usize>(
    q: &[f32],
    d: usize,
    rows: &[f32],
    out: &mut [f32],
    stride: usize,
    j0: usize,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); G]; R];
        let mut i = 0;
        while i + 8 <= d {
            let v = each!(R, _mm256_setzero_ps(), |r| _mm256_loadu_ps(
                rows.as_ptr().add(r * d + i)
            ));
            for g in 0..G {
                let qv = _mm256_loadu_ps(q.as_ptr().add(g * d + i));
                for (acc, v) in acc.iter_mut().zip(&v) {
                    acc[g] = _mm256_fmadd_ps(qv, *v, acc[g]);
                }
            }
            i += 8;
        }
        for (r, acc) in acc.iter().enumerate() {
            let row = &rows[r * d..(r + 1) * d];
            for (g, a) in acc.iter().enumerate() {
                let qg = &q[g * d..(g + 1) * d];
                let tail: f32 = qg[i..].iter().zip(&row[i..]).map(|(x, y)| x * y).sum();
                out[g * stride + j0 + r] = hsum_ps(*a) + tail;
            }
        }
    }
}

/// [`super::f32_weighted_sum`] for `G <= 4` accumulators: each row's slice of `8 S` floats is
/// loaded once for all of them, and the `G · S` accumulator registers stay live over all rows.
/// Whole cache lines per pass matter: rows are often 1 KiB apart, so a pass touching half a
/// line per row would fetch every line twice through a few L1 sets. Bit-identical to the
/// scalar version (each element still adds the rows in order with one fused multiply-add).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_weighted_sum_g<const G: usize>(
    acc: &mut [f32],
    rows: &[f32],
    w: &[f32],
    stride: usize,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { weighted_sum_columns::<G>(acc, rows, w, stride, 0) }
}

/// Columns `[i, d)` of [`f32_weighted_sum_g`] (the AVX-512 version does the ones before).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weighted_sum_columns<const G: usize>(
    acc: &mut [f32],
    rows: &[f32],
    w: &[f32],
    stride: usize,
    mut i: usize,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let d = acc.len() / G;
        // Enough independent accumulators to cover the FMA latency.
        match G {
            1 | 2 => weighted_pass::<G, 4>(acc, d, rows, w, stride, &mut i),
            _ => weighted_pass::<G, 2>(acc, d, rows, w, stride, &mut i),
        }
        weighted_pass::<G, 1>(acc, d, rows, w, stride, &mut i);
        if i == d {
            return;
        }
        let n = rows.len() / d.max(1);
        for g in 0..G {
            for j in 0..n {
                let (wj, r) = (w[g * stride + j], &rows[j * d..(j + 1) * d]);
                for (a, x) in acc[g * d + i..(g + 1) * d].iter_mut().zip(&r[i..]) {
                    *a = x.mul_add(wj, *a);
                }
            }
        }
    }
}

/// Columns `[*i, ..)` of [`f32_weighted_sum_g`] in passes of `8 S` floats while whole passes
/// fit; advances `*i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weighted_pass<const G: usize, const S: usize>(
    acc: &mut [f32],
    d: usize,
    rows: &[f32],
    w: &[f32],
    stride: usize,
    i: &mut usize,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = rows.len() / d.max(1);
        let p = acc.as_mut_ptr();
        while *i + 8 * S <= d {
            let c = *i;
            let mut a = each!(G, [_mm256_setzero_ps(); S], |g| each!(
                S,
                _mm256_setzero_ps(),
                |s| _mm256_loadu_ps(p.add(g * d + c + 8 * s))
            ));
            for j in 0..n {
                let r = rows.as_ptr().add(j * d + c);
                let v = each!(S, _mm256_setzero_ps(), |s| _mm256_loadu_ps(r.add(8 * s)));
                for (g, a) in a.iter_mut().enumerate() {
                    let wj = _mm256_set1_ps(*w.get_unchecked(g * stride + j));
                    for (a, v) in a.iter_mut().zip(&v) {
                        *a = _mm256_fmadd_ps(wj, *v, *a);
                    }
                }
            }
            for (g, a) in a.iter().enumerate() {
                for (s, a) in a.iter().enumerate() {
                    _mm256_storeu_ps(p.add(g * d + c + 8 * s), *a);
                }
            }
            *i += 8 * S;
        }
    }
}

/// Up to 4 queries per call of the `G`-wide kernels (their accumulators stay in registers).
macro_rules! by_group {
    ($f:ident, $g:expr, $($arg:expr),*) => {
        match $g {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            _ => $f::<4>($($arg),*),
        }
    };
}

/// [`super::f32_dots`] four queries at a time.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f32_dots(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n_q = q.len() / d.max(1);
        for g0 in (0..n_q).step_by(4) {
            let g = (n_q - g0).min(4);
            let (q, out) = (&q[g0 * d..(g0 + g) * d], &mut out[g0 * stride..]);
            by_group!(f32_dots_g, g, q, rows, out, stride);
        }
    }
}

/// [`super::f32_weighted_sum`] four accumulators at a time; bit-identical to it.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f32_weighted_sum(acc: &mut [f32], d: usize, rows: &[f32], w: &[f32], stride: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n_acc = acc.len() / d.max(1);
        for g0 in (0..n_acc).step_by(4) {
            let g = (n_acc - g0).min(4);
            let (acc, w) = (&mut acc[g0 * d..(g0 + g) * d], &w[g0 * stride..]);
            by_group!(f32_weighted_sum_g, g, acc, rows, w, stride);
        }
    }
}
