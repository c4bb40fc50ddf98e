//! Vector operations for attention (the f16 value accumulator of the per-query kernel, f32 dot
//! and multiply-add rows of the tiled one), dispatched like the matmul kernels.

use half::f16;

use super::{cpu_path, scalar, CpuPath};

/// `acc[i] = f16(v[i] * w + acc[i])` (one rounding per element) on `path`.
pub fn f16_mad_with(path: CpuPath, acc: &mut [f16], v: &[f16], w: f32) {
    assert_eq!(acc.len(), v.len(), "f16_mad: lengths differ");
    match path {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected.
            unsafe { super::avx2::f16_mad(acc, v, w) }
        }
        _ => scalar::f16_mad(acc, v, w),
    }
}

/// `acc[i] = f16(acc[i] * s)` on `path`.
pub fn f16_scale_with(path: CpuPath, acc: &mut [f16], s: f32) {
    match path {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected.
            unsafe { super::avx2::f16_scale(acc, s) }
        }
        _ => scalar::f16_scale(acc, s),
    }
}

/// [`f16_mad_with`] on the dispatched path.
pub fn f16_mad(acc: &mut [f16], v: &[f16], w: f32) {
    f16_mad_with(cpu_path(), acc, v, w)
}

/// [`f16_scale_with`] on the dispatched path.
pub fn f16_scale(acc: &mut [f16], s: f32) {
    f16_scale_with(cpu_path(), acc, s)
}

/// `out[g * stride + j] = q[g] · rows[j]` for the `d`-long queries packed in `q` and rows
/// packed in `rows`, on the dispatched path (each row is read once for all queries).
pub fn f32_dots(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    let (n_q, n) = (q.len() / d.max(1), rows.len() / d.max(1));
    assert!(
        q.len() == n_q * d
            && rows.len() == n * d
            && (n_q == 0 || (n_q - 1) * stride + n <= out.len()),
        "f32_dots: shapes differ"
    );
    match cpu_path() {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected; shapes checked above.
            unsafe { super::avx2::f32_dots(q, d, rows, out, stride) }
        }
        _ => scalar::f32_dots(q, d, rows, out, stride),
    }
}

/// `acc[g] += sum_j w[g * stride + j] * rows[j]` for the `d`-long accumulators packed in
/// `acc` and rows packed in `rows`, on the dispatched path.
pub fn f32_weighted_sum(acc: &mut [f32], d: usize, rows: &[f32], w: &[f32], stride: usize) {
    let (n_acc, n) = (acc.len() / d.max(1), rows.len() / d.max(1));
    assert!(
        acc.len() == n_acc * d
            && rows.len() == n * d
            && (n_acc == 0 || (n_acc - 1) * stride + n <= w.len()),
        "f32_weighted_sum: shapes differ"
    );
    match cpu_path() {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected; shapes checked above.
            unsafe { super::avx2::f32_weighted_sum(acc, d, rows, w, stride) }
        }
        _ => scalar::f32_weighted_sum(acc, d, rows, w, stride),
    }
}
