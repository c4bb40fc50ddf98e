//! Q5_0 on AVX-512 VNNI, weights in place (`KOLIBRI_REPACK=0`): two blocks per `vpdpbusd`
//! for the dot, the AVX2 tiles for batches.
//!
//! # Safety
//! Every `pub unsafe fn` requires the AVX-512 path's features and activations from the
//! crate's quantizers.

use std::arch::x86_64::*;

use super::Q5_0;
use crate::kernels::simd::avx512::{dot_offset, load2x256, nibbles2x32, scales2, tf};
use crate::kernels::types::q8_family::avx2::tile;
use crate::kernels::types::{tiles, Dense, WeightType};
use crate::quant::blocks::{BlockQ5_0, BlockQ8_0};

pub(super) const DENSE: Dense<BlockQ5_0, BlockQ8_0> = Dense {
    dot,
    dot_isa: "avx512",
    tiles: tiles!(Rows1, tile, BlockQ5_0),
    tiles_isa: "avx2",
};

tf! {
/// Q5_0 weights × Q8_0 activations.
///
/// # Safety
/// See the module docs.
pub unsafe fn dot(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let n = w.len().min(a.len());
        let mut acc = _mm512_setzero_ps();
        let b16 = _mm512_set1_epi8(16);
        let mut i = 0;
        while i + 2 <= n {
            let (x0, x1) = (w.get_unchecked(i), w.get_unchecked(i + 1));
            let (y0, y1) = (a.get_unchecked(i), a.get_unchecked(i + 1));
            let q = nibbles2x32(x0.qs.as_ptr(), x1.qs.as_ptr());
            // Bit j of qh is the 5th bit of element j, and the elements are in order.
            let bits = u32::from_le_bytes(x0.qh) as u64 | (u32::from_le_bytes(x1.qh) as u64) << 32;
            let q = _mm512_or_si512(q, _mm512_maskz_mov_epi8(bits, b16));
            let av = load2x256(y0.qs.as_ptr() as _, y1.qs.as_ptr() as _);
            let p = dot_offset::<4>(q, av);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scales2(x0.d, x1.d, y0.d, y1.d), acc);
            i += 2;
        }
        _mm512_reduce_add_ps(acc) + Q5_0::dot(&w[i..n], &a[i..n])
    }
}
}
