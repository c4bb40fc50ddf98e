//! f16 row operations of the attention kernels: the key dot, the f16 value accumulator's
//! multiply-add and rescale, and widening a cached row. Scalar twins first, then AVX2 (F16C)
//! versions, bit-identical to them.

use half::f16;

/// `acc[i] = f16(v[i] * w + acc[i])` with one rounding of the fused product-sum, as ggml's
/// `ggml_vec_mad_f16` (the value accumulation of its flash-attention kernel).
pub fn f16_mad(acc: &mut [f16], v: &[f16], w: f32) {
    for (a, x) in acc.iter_mut().zip(v) {
        *a = f16::from_f32(x.to_f32().mul_add(w, a.to_f32()));
    }
}

/// `q · k` with the f16 row `k` widened exactly: eight partial sums (sum `i` takes the
/// elements `≡ i (mod 8)`), each product rounded before its add (no fused multiply-add),
/// then the eight summed in order, then the tail's products. The SIMD twins reproduce it bit
/// for bit.
pub fn f16_dot(q: &[f32], k: &[f16]) -> f32 {
    let n = q.len().min(k.len());
    let body = n / 8 * 8;
    let mut acc = [0f32; 8];
    for (cq, ck) in q[..body].chunks_exact(8).zip(k[..body].chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += cq[i] * ck[i].to_f32();
        }
    }
    let tail: f32 = q[body..n]
        .iter()
        .zip(&k[body..n])
        .map(|(x, y)| x * y.to_f32())
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// `dst[i] = src[i]` widened to f32 (exact).
pub fn f16_row_to_f32(src: &[f16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

/// `acc[i] = f16(acc[i] * s)`, as ggml's `ggml_vec_scale_f16`.
pub fn f16_scale(acc: &mut [f16], s: f32) {
    for a in acc.iter_mut() {
        *a = f16::from_f32(a.to_f32() * s);
    }
}

/// The AVX2 + F16C versions.
///
/// # Safety
/// Every `pub unsafe fn` here requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use std::arch::x86_64::*;

    use half::f16;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn f16_mad(acc: &mut [f16], v: &[f16], w: f32) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let n = acc.len().min(v.len());
            let wv = _mm256_set1_ps(w);
            let mut i = 0;
            while i + 8 <= n {
                let pa = acc.as_mut_ptr().add(i) as *mut __m128i;
                let a = _mm256_cvtph_ps(_mm_loadu_si128(pa));
                let x = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i) as *const __m128i));
                _mm_storeu_si128(
                    pa,
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_fmadd_ps(x, wv, a)),
                );
                i += 8;
            }
            super::f16_mad(&mut acc[i..n], &v[i..n], w);
        }
    }

    /// [`super::f16_dot`] eight lanes at a time (multiply, then add: no FMA); bit-identical to it.
    ///
    /// # Safety
    /// See the module's docs.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn f16_dot(q: &[f32], k: &[f16]) -> f32 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let n = q.len().min(k.len());
            let body = n / 8 * 8;
            let mut acc = _mm256_setzero_ps();
            for i in (0..body).step_by(8) {
                let kv = _mm256_cvtph_ps(_mm_loadu_si128(k.as_ptr().add(i) as *const __m128i));
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q.as_ptr().add(i)), kv));
            }
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
            let sum = lanes.iter().sum::<f32>();
            if body == n {
                sum
            } else {
                sum + super::f16_dot(&q[body..n], &k[body..n])
            }
        }
    }

    /// [`super::f16_row_to_f32`] eight lanes at a time (F16C); bit-identical to it.
    ///
    /// # Safety
    /// See the module's docs.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn f16_row_to_f32(src: &[f16], dst: &mut [f32]) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let n = src.len().min(dst.len()) / 8 * 8;
            for i in (0..n).step_by(8) {
                let h = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
            super::f16_row_to_f32(&src[n..], &mut dst[n..]);
        }
    }

    /// [`super::f16_scale`] eight lanes at a time; bit-identical to it.
    ///
    /// # Safety
    /// See the module's docs.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn f16_scale(acc: &mut [f16], s: f32) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let sv = _mm256_set1_ps(s);
            let mut chunks = acc.chunks_exact_mut(8);
            for c in &mut chunks {
                let p = c.as_mut_ptr() as *mut __m128i;
                let a = _mm256_cvtph_ps(_mm_loadu_si128(p));
                _mm_storeu_si128(
                    p,
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(a, sv)),
                );
            }
            super::f16_scale(chunks.into_remainder(), s);
        }
    }
}
