//! Vector operations for attention (f16 key dots and the f16 value accumulator of the
//! per-query kernel, f32 dot and multiply-add rows of the tiled one), dispatched like the
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

/// `dst[i] = src[i]` widened to f32 on `path` (exact on every path).
pub fn f16_row_to_f32_with(path: CpuPath, src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "f16_row_to_f32: lengths differ");
    match path {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected.
            unsafe { super::avx2::f16_row_to_f32(src, dst) }
        }
        _ => scalar::f16_row_to_f32(src, dst),
    }
}

/// [`f16_row_to_f32_with`] on the dispatched path.
pub fn f16_row_to_f32(src: &[f16], dst: &mut [f32]) {
    f16_row_to_f32_with(cpu_path(), src, dst)
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

/// `q · k` for an f16 row `k` on `path`, exactly [`scalar::f16_dot`].
pub fn f16_dot_with(path: CpuPath, q: &[f32], k: &[f16]) -> f32 {
    assert_eq!(q.len(), k.len(), "f16_dot: lengths differ");
    match path {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected.
            unsafe { super::avx2::f16_dot(q, k) }
        }
        _ => scalar::f16_dot(q, k),
    }
}

/// [`f16_dot_with`] on the dispatched path.
pub fn f16_dot(q: &[f32], k: &[f16]) -> f32 {
    f16_dot_with(cpu_path(), q, k)
}

/// One query head's pass over cache rows `rows` with an online softmax, the way ggml's
/// per-query flash-attention kernel computes: `q16` already rounded to f16, the value
/// accumulator held in f16, rescaled whenever a new maximum score appears. Key row `p` is
/// `keys[p * stride_k..][..q16.len()]`, value row `p` is `values[p * stride_v..][..out.len()]`.
/// Writes the attention output (f32) to `out`.
#[allow(clippy::too_many_arguments)]
pub fn f16_attend_with(
    path: CpuPath,
    q16: &[f32],
    keys: &[f16],
    values: &[f16],
    (stride_k, stride_v): (usize, usize),
    rows: std::ops::Range<usize>,
    scale: f32,
    out: &mut [f32],
) {
    let (hk, hv) = (q16.len(), out.len());
    assert!(
        rows.is_empty()
            || ((rows.end - 1) * stride_k + hk <= keys.len()
                && (rows.end - 1) * stride_v + hv <= values.len()),
        "f16_attend: rows beyond the cache"
    );
    let cache = Cache {
        keys,
        values,
        stride_k,
        stride_v,
    };
    match path {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected; rows checked above.
            unsafe { attend_avx2(q16, &cache, rows, scale, out) }
        }
        _ => online_attend::<ScalarOps>(q16, &cache, rows, scale, out),
    }
}

/// [`f16_attend_with`] on the dispatched path.
pub fn f16_attend(
    q16: &[f32],
    keys: &[f16],
    values: &[f16],
    strides: (usize, usize),
    rows: std::ops::Range<usize>,
    scale: f32,
    out: &mut [f32],
) {
    f16_attend_with(cpu_path(), q16, keys, values, strides, rows, scale, out)
}

/// One kv head's rows of the cache.
struct Cache<'a> {
    keys: &'a [f16],
    values: &'a [f16],
    stride_k: usize,
    stride_v: usize,
}

/// The three vector steps of [`online_attend`], per instruction set.
trait AttendOps {
    fn dot(q: &[f32], k: &[f16]) -> f32;
    fn scale(acc: &mut [f16], s: f32);
    fn mad(acc: &mut [f16], v: &[f16], w: f32);
}

struct ScalarOps;

impl AttendOps for ScalarOps {
    fn dot(q: &[f32], k: &[f16]) -> f32 {
        scalar::f16_dot(q, k)
    }
    fn scale(acc: &mut [f16], s: f32) {
        scalar::f16_scale(acc, s)
    }
    fn mad(acc: &mut [f16], v: &[f16], w: f32) {
        scalar::f16_mad(acc, v, w)
    }
}

/// Only used inside [`attend_avx2`], which checked the features.
#[cfg(target_arch = "x86_64")]
struct Avx2Ops;

#[cfg(target_arch = "x86_64")]
impl AttendOps for Avx2Ops {
    #[inline(always)]
    fn dot(q: &[f32], k: &[f16]) -> f32 {
        // SAFETY: reached only from `attend_avx2` (AVX2, FMA and F16C detected).
        unsafe { super::avx2::f16_dot(q, k) }
    }
    #[inline(always)]
    fn scale(acc: &mut [f16], s: f32) {
        // SAFETY: as above.
        unsafe { super::avx2::f16_scale(acc, s) }
    }
    #[inline(always)]
    fn mad(acc: &mut [f16], v: &[f16], w: f32) {
        // SAFETY: as above.
        unsafe { super::avx2::f16_mad(acc, v, w) }
    }
}

/// [`online_attend`] compiled with AVX2, so the vector steps inline into the row loop.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_avx2(
    q16: &[f32],
    cache: &Cache,
    rows: std::ops::Range<usize>,
    scale: f32,
    out: &mut [f32],
) {
    online_attend::<Avx2Ops>(q16, cache, rows, scale, out)
}

#[inline(always)]
fn online_attend<O: AttendOps>(
    q16: &[f32],
    cache: &Cache,
    rows: std::ops::Range<usize>,
    scale: f32,
    out: &mut [f32],
) {
    let (hk, hv) = (q16.len(), out.len());
    let mut acc = vec![f16::ZERO; hv];
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    for p in rows {
        let score = O::dot(q16, &cache.keys[p * cache.stride_k..][..hk]) * scale;
        // A new maximum rescales what was accumulated; otherwise this value is weighted down.
        let (rescale, weight) = if score > max {
            let r = (max - score).exp();
            max = score;
            (r, 1.0)
        } else {
            (1.0, (score - max).exp())
        };
        if rescale != 1.0 {
            O::scale(&mut acc, rescale);
        }
        O::mad(&mut acc, &cache.values[p * cache.stride_v..][..hv], weight);
        sum = sum * rescale + weight;
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = a.to_f32() / sum;
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
        CpuPath::Avx512 if super::avx512::detected() => {
            // SAFETY: AVX-512 (with AVX2, FMA and F16C) was detected; shapes checked above.
            unsafe { super::avx512::f32_dots(q, d, rows, out, stride) }
        }
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
        CpuPath::Avx512 if super::avx512::detected() => {
            // SAFETY: AVX-512 (with AVX2, FMA and F16C) was detected; shapes checked above.
            unsafe { super::avx512::f32_weighted_sum(acc, d, rows, w, stride) }
        }
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 | CpuPath::Avx512 if super::avx2::detected() => {
            // SAFETY: AVX2, FMA and F16C were detected; shapes checked above.
            unsafe { super::avx2::f32_weighted_sum(acc, d, rows, w, stride) }
        }
        _ => scalar::f32_weighted_sum(acc, d, rows, w, stride),
    }
}
