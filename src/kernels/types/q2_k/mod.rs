//! Q2_K: 256 weights in 16 sub-blocks of 16, a 2-bit quant per weight and a 4-bit scale and
//! min per sub-block; Q8_K activations. Repacked at load into 8-row groups on x86 ([`x8`]);
//! in place on aarch64 (a NEON dot kernel per token, i8mm tiles for batches).

#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ2K, BlockQ8K};
use crate::quant::dequant::dequantize_q2_k;

weight_type! {
    /// Q2_K weights × Q8_K activations.
    Q2K = Q2_K, BlockQ2K, BlockQ8K, 256;
    dot: dot, dequantize: dequantize_q2_k, scales: |b, bits| (b.d, b.dmin) = (random_scale(bits()), random_scale(bits()));
    simd: arm;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block, scaled in f32 as llama.cpp's generic kernel.
fn dot(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let summs: i32 = (0..16)
            .map(|j| y.bsums[j] as i32 * (x.scales[j] >> 4) as i32)
            .sum();
        let mut isum = 0i32;
        // Element 128*h + 32*s + l reads bits 2s..2s+2 of qs[32*h + l]; scale index 2*(4h+s) +
        // (l >= 16).
        for h in 0..2 {
            for s in 0..4 {
                for half in 0..2 {
                    let sc = (x.scales[8 * h + 2 * s + half] & 0x0f) as i32;
                    let mut acc = 0i32;
                    for l in 16 * half..16 * half + 16 {
                        let q = ((x.qs[32 * h + l] >> (2 * s)) & 3) as i32;
                        acc += q * y.qs[128 * h + 32 * s + l] as i32;
                    }
                    isum += sc * acc;
                }
            }
        }
        let dall = y.d * x.d.to_f32();
        let dmin = y.d * x.dmin.to_f32();
        sum += dall * isum as f32 - dmin * summs as f32;
    }
    sum
}
