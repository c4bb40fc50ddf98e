//! Vector operations for attention (the f16 value accumulator of the per-query kernel, f32 dot
//! and multiply-add rows of the tiled one), dispatched like the matmul kernels.

use half::f16;

use super::{cpu_path, kernels, scalar, CpuPath};

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

/// `out[j] = q · rows[j]` for the rows of length `q.len()` packed in `rows`, on the dispatched
/// path (the F32 matmul's dot kernel).
pub fn f32_dots(q: &[f32], rows: &[f32], out: &mut [f32]) {
    assert_eq!(rows.len(), q.len() * out.len(), "f32_dots: shapes differ");
    // SAFETY: `kernels` hands out only a table the CPU supports.
    let dot = kernels(cpu_path()).f32;
    for (o, r) in out.iter_mut().zip(rows.chunks_exact(q.len().max(1))) {
        *o = unsafe { dot(q, r) };
    }
}

/// `acc += sum_j w[j] * rows[j]` for the rows of length `acc.len()` packed in `rows`, on the
/// dispatched path.
pub fn f32_weighted_sum(acc: &mut [f32], rows: &[f32], w: &[f32]) {
    assert_eq!(
        rows.len(),
        acc.len() * w.len(),
        "f32_weighted_sum: shapes differ"
    );
    match cpu_path() {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected.
            unsafe { super::avx2::f32_weighted_sum(acc, rows, w) }
        }
        _ => scalar::f32_weighted_sum(acc, rows, w),
    }
}
