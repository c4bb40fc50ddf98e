//! Q5_K: Q4_K with a fifth bit per weight in `qh`; Q8_K activations. Repacked at load into
//! 8-row groups on x86 ([`x8`]); in place: a dot kernel per token (AVX2, AVX-512, NEON),
//! i8mm tiles for batches on aarch64.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ5K, BlockQ8K};
use crate::quant::dequant::dequantize_q5_k;
use crate::quant::dequant_k::unpack_k4_scales;

weight_type! {
    /// Q5_K weights × Q8_K activations.
    Q5K = Q5_K, BlockQ5K, BlockQ8K, 256;
    dot: dot, dequantize: dequantize_q5_k, scales: |b, bits| (b.d, b.dmin) = (random_scale(bits()), random_scale(bits()));
    simd: all;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block, scaled in f32 as llama.cpp's generic kernel.
fn dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (sc, m) = unpack_k4_scales(&x.scales);
        let mut isum = 0i32;
        for j in 0..4 {
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let q = x.qs[32 * j + l];
                let h = x.qh[l] >> (2 * j);
                let ql = (q & 0x0f) | ((h & 1) << 4);
                let qh = (q >> 4) | ((h & 2) << 3);
                lo += ql as i32 * y.qs[64 * j + l] as i32;
                hi += qh as i32 * y.qs[64 * j + 32 + l] as i32;
            }
            isum += sc[2 * j] as i32 * lo + sc[2 * j + 1] as i32 * hi;
        }
        let summ: i32 = (0..16).map(|j| y.bsums[j] as i32 * m[j / 2] as i32).sum();
        sum += x.d.to_f32() * y.d * isum as f32 - x.dmin.to_f32() * y.d * summ as f32;
    }
    sum
}
