//! AVX-512 versions of the [`super`] row operations.
//!
//! # Safety
//! Every `pub unsafe fn` here requires AVX-512 F/BW/VL/VNNI with the AVX2 set, and the shapes
//! the backend checks.

use std::arch::x86_64::*;

use crate::kernels::simd::avx512::tf;

tf! {
/// [`super::f32_dots`] on 16 lanes: up to four queries against four rows per pass, each row
/// slice loaded once for all queries and each query slice once for all rows; a masked pass
/// takes the tail of `d`. Matches the scalar version within f32 rounding (its sums are f64).
///
/// # Safety
/// See the module docs.
pub unsafe fn f32_dots(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n_q = q.len() / d.max(1);
        for g0 in (0..n_q).step_by(4) {
            let g = (n_q - g0).min(4);
            let (q, out) = (&q[g0 * d..(g0 + g) * d], &mut out[g0 * stride..]);
            match g {
                1 => dots_g::<1>(q, d, rows, out, stride),
                2 => dots_g::<2>(q, d, rows, out, stride),
                3 => dots_g::<3>(q, d, rows, out, stride),
                _ => dots_g::<4>(q, d, rows, out, stride),
            }
        }
    }
}

/// All rows against `G` queries: blocks of four rows, then single rows.
#[inline]
unsafe fn dots_g<const G: usize>(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = rows.len() / d.max(1);
        let mut j = 0;
        while j + 4 <= n {
            dots_block::<G, 4>(q, d, rows, out, stride, j);
            j += 4;
        }
        for j in j..n {
            dots_block::<G, 1>(q, d, rows, out, stride, j);
        }
    }
}

/// Rows `j0..j0 + R` against the `G` queries of [`f32_dots`].
#[inline]
unsafe fn dots_block<const G: usize, const R: usize>(
    q: &[f32],
    d: usize,
    rows: &[f32],
    out: &mut [f32],
    stride: usize,
    j0: usize,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let (pq, pr) = (q.as_ptr(), rows.as_ptr().add(j0 * d));
        let mut acc = [[_mm512_setzero_ps(); G]; R];
        let mut i = 0;
        let mut step = |i: usize, mask: __mmask16| {
            let v = each!(R, _mm512_setzero_ps(), |r| _mm512_maskz_loadu_ps(mask, pr.add(r * d + i)));
            for g in 0..G {
                let qv = _mm512_maskz_loadu_ps(mask, pq.add(g * d + i));
                for (acc, v) in acc.iter_mut().zip(&v) {
                    acc[g] = _mm512_fmadd_ps(qv, *v, acc[g]);
                }
            }
        };
        while i + 16 <= d {
            step(i, !0);
            i += 16;
        }
        if i < d {
            step(i, (1u16 << (d - i)) - 1);
        }
        for g in 0..G {
            if R == 4 {
                let sums = hsum4(acc[0][g], acc[1][g], acc[2][g], acc[3][g]);
                _mm_storeu_ps(out.as_mut_ptr().add(g * stride + j0), sums);
            } else {
                for (r, acc) in acc.iter().enumerate() {
                    out[g * stride + j0 + r] = _mm512_reduce_add_ps(acc[g]);
                }
            }
        }
    }
}

/// `[Σa, Σb, Σc, Σd]`: the four horizontal sums at once.
#[inline]
unsafe fn hsum4(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    let [a, b, c, d] = unsafe { [halves_added(a), halves_added(b), halves_added(c), halves_added(d)] };
    let abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps::<1>(abcd))
}

/// The low and high 8 lanes added. The high half through an integer cast: `extractf32x8`
/// needs AVX-512 DQ, which this path does not enable (the call would not inline).
#[inline]
unsafe fn halves_added(v: __m512) -> __m256 {
    let high = _mm512_extracti64x4_epi64::<1>(_mm512_castps_si512(v));
    _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castsi256_ps(high))
}

/// [`super::f32_weighted_sum`] on 16 lanes, four accumulators at a time; bit-identical to it
/// (each element still adds the rows in order with one fused multiply-add). Columns short of
/// a 16-lane pass go to the AVX2 kernel.
///
/// # Safety
/// See the module docs.
pub unsafe fn f32_weighted_sum(acc: &mut [f32], d: usize, rows: &[f32], w: &[f32], stride: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n_acc = acc.len() / d.max(1);
        for g0 in (0..n_acc).step_by(4) {
            let g = (n_acc - g0).min(4);
            let (acc, w) = (&mut acc[g0 * d..(g0 + g) * d], &w[g0 * stride..]);
            match g {
                1 => weighted_sum_g::<1>(acc, rows, w, stride),
                2 => weighted_sum_g::<2>(acc, rows, w, stride),
                3 => weighted_sum_g::<3>(acc, rows, w, stride),
                _ => weighted_sum_g::<4>(acc, rows, w, stride),
            }
        }
    }
}

/// `G` accumulators of [`f32_weighted_sum`]: passes of `16 S` columns with the `G · S`
/// accumulator registers live over all rows, as in the AVX2 kernel.
#[inline]
unsafe fn weighted_sum_g<const G: usize>(acc: &mut [f32], rows: &[f32], w: &[f32], stride: usize) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut i = 0;
        match G {
            1 | 2 => weighted_pass::<G, 4>(acc, rows, w, stride, &mut i),
            _ => weighted_pass::<G, 2>(acc, rows, w, stride, &mut i),
        }
        weighted_pass::<G, 1>(acc, rows, w, stride, &mut i);
        super::avx2::weighted_sum_columns::<G>(acc, rows, w, stride, i);
    }
}

/// Columns `[*i, ..)` in passes of `16 S` floats while whole passes fit; advances `*i`.
#[inline]
unsafe fn weighted_pass<const G: usize, const S: usize>(
    acc: &mut [f32],
    rows: &[f32],
    w: &[f32],
    stride: usize,
    i: &mut usize,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let d = acc.len() / G;
        let n = rows.len() / d.max(1);
        let p = acc.as_mut_ptr();
        while *i + 16 * S <= d {
            let c = *i;
            let mut a = each!(G, [_mm512_setzero_ps(); S], |g| each!(S, _mm512_setzero_ps(), |s| {
                _mm512_loadu_ps(p.add(g * d + c + 16 * s))
            }));
            for j in 0..n {
                let r = rows.as_ptr().add(j * d + c);
                let v = each!(S, _mm512_setzero_ps(), |s| _mm512_loadu_ps(r.add(16 * s)));
                for (g, a) in a.iter_mut().enumerate() {
                    let wj = _mm512_set1_ps(*w.get_unchecked(g * stride + j));
                    for (a, v) in a.iter_mut().zip(&v) {
                        *a = _mm512_fmadd_ps(wj, *v, *a);
                    }
                }
            }
            for (g, a) in a.iter().enumerate() {
                for (s, a) in a.iter().enumerate() {
                    _mm512_storeu_ps(p.add(g * d + c + 16 * s), *a);
                }
            }
            *i += 16 * S;
        }
    }
}
}
