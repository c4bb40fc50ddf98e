//! Q4_0: 32 weights per block, `w = d * (q - 8)` with `q` a nibble; Q8_0 activations.
//! Repacked at load into 8-row groups on x86 ([`x8`]); in place elsewhere (a dot kernel per
//! token, tiles for batches).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ4_0, BlockQ8_0};
use crate::quant::dequant::dequantize_q4_0;

weight_type! {
    /// Q4_0 weights × Q8_0 activations.
    Q4_0 = Q4_0, BlockQ4_0, BlockQ8_0, 32;
    dot: dot, dequantize: dequantize_q4_0, scales: |b, bits| b.d = random_scale(bits());
    simd: all;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block, scaled in f32 as llama.cpp's generic kernel.
fn dot(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..16 {
            let lo = (x.qs[j] & 0x0f) as i32 - 8;
            let hi = (x.qs[j] >> 4) as i32 - 8;
            sumi += lo * y.qs[j] as i32 + hi * y.qs[j + 16] as i32;
        }
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}
