//! Vector operations on f16 buffers (attention's f16 value accumulator), dispatched like the
//! matmul kernels.

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
