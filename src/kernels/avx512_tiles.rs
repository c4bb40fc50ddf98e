//! AVX-512 tile kernels for the float weight types (F32, F16, BF16): `R` weight rows × `T`
//! tokens per call. Each 16-element slice of a weight row is loaded and widened to f32 once
//! for all `T` tokens, and each token's slice once for all `R` rows, where the dot kernels of
//! [`super::avx512`] widen both operands for every (row, token) pair. The products are theirs
//! (exact widening, one FMA per element); only the order of the f32 sums differs, and the
//! last partial slice is a masked load rather than a scalar loop.
//!
//! # Safety
//! Every `pub unsafe fn` here requires [`super::avx512::detected`]. Rows should have equal
//! lengths; only the shortest row's length is used.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::avx512::{bf16_widen16, tf};
use super::common_len;

/// 16 values from `p`, or the first `n < 16` of them (the rest zero), as f32.
pub(super) trait Lanes16: Copy {
    /// # Safety
    /// AVX-512 ([`super::avx512::detected`]); `min(n, 16)` values readable at `p`.
    unsafe fn load16(p: *const Self, n: usize) -> __m512;
}

/// Lanes `0..n` set, for the masked loads of a partial slice.
#[inline]
fn first(n: usize) -> __mmask16 {
    if n >= 16 {
        u16::MAX
    } else {
        (1u16 << n) - 1
    }
}

tf! {
/// 16 halves (u16 lanes), masked to the first `n`.
#[inline]
unsafe fn halves16(p: *const u16, n: usize) -> __m256i {
    _mm256_maskz_loadu_epi16(first(n), p as *const i16)
}
}

impl Lanes16 for f32 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn load16(p: *const f32, n: usize) -> __m512 {
        _mm512_maskz_loadu_ps(first(n), p)
    }
}

impl Lanes16 for f16 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn load16(p: *const f16, n: usize) -> __m512 {
        _mm512_cvtph_ps(halves16(p as *const u16, n))
    }
}

impl Lanes16 for bf16 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn load16(p: *const bf16, n: usize) -> __m512 {
        bf16_widen16(halves16(p as *const u16, n))
    }
}

tf! {
/// `R` rows × `T` tokens of a float type `E` (f32, f16, bf16): `R · T` accumulators of 16
/// lanes, so `R = 2`, `T = 8` keeps 19 of the 32 registers busy.
///
/// # Safety
/// See the module docs.
pub(super) unsafe fn float_tile<E: Lanes16, const R: usize, const T: usize>(
    w: [&[E]; R],
    a: [&[E]; T],
) -> [[f32; T]; R] {
    let n = common_len(&w, &a);
    let mut acc = [[_mm512_setzero_ps(); T]; R];
    let mut i = 0;
    while i < n {
        let left = n - i;
        let x: [__m512; R] = std::array::from_fn(|r| E::load16(w[r].as_ptr().add(i), left));
        for t in 0..T {
            let y = E::load16(a[t].as_ptr().add(i), left);
            for r in 0..R {
                acc[r][t] = _mm512_fmadd_ps(x[r], y, acc[r][t]);
            }
        }
        i += 16;
    }
    let mut out = [[0.0; T]; R];
    for r in 0..R {
        for t in 0..T {
            out[r][t] = _mm512_reduce_add_ps(acc[r][t]);
        }
    }
    out
}
}
