//! Q3_K: 256 weights in 16 sub-blocks of 16, a 3-bit quant per weight (the high bit in
//! `hmask`) and a 6-bit scale per sub-block; Q8_K activations. Repacked at load into 8-row
//! groups on x86 ([`x8`]); in place on aarch64 (a NEON dot kernel per token, i8mm tiles
//! for batches).

#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ3K, BlockQ8K};
use crate::quant::dequant::{dequantize_q3_k, unpack_q3_k_scales};

weight_type! {
    /// Q3_K weights × Q8_K activations.
    Q3K = Q3_K, BlockQ3K, BlockQ8K, 256;
    dot: dot, dequantize: dequantize_q3_k, scales: |b, bits| b.d = random_scale(bits());
    simd: arm;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block, scaled in f32 as llama.cpp's generic kernel.
fn dot(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let scales = unpack_q3_k_scales(&x.scales);
        let mut isum = 0i32;
        for h in 0..2 {
            for s in 0..4 {
                let bit = 1u8 << (4 * h + s);
                for half in 0..2 {
                    let mut acc = 0i32;
                    for l in 16 * half..16 * half + 16 {
                        let mut q = ((x.qs[32 * h + l] >> (2 * s)) & 3) as i32;
                        if x.hmask[l] & bit == 0 {
                            q -= 4;
                        }
                        acc += q * y.qs[128 * h + 32 * s + l] as i32;
                    }
                    isum += scales[8 * h + 2 * s + half] as i32 * acc;
                }
            }
        }
        sum += x.d.to_f32() * y.d * isum as f32;
    }
    sum
}
