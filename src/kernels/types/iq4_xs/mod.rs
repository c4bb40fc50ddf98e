//! IQ4_XS: 256 weights in 8 sub-blocks of 32, IQ4_NL's codebook with a 6-bit scale per
//! sub-block under one f16 super-scale; Q8_K activations. Repacked at load into 8-row groups
//! on x86 ([`x8`]); in place on aarch64 (a NEON dot kernel per token, i8mm tiles for
//! batches).

#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockIQ4XS, BlockQ8K, KVALUES_IQ4NL};
use crate::quant::dequant::{dequantize_iq4_xs, iq4_xs_scale};

weight_type! {
    /// IQ4_XS weights × Q8_K activations.
    IQ4XS = IQ4_XS, BlockIQ4XS, BlockQ8K, 256;
    dot: dot, dequantize: dequantize_iq4_xs, scales: |b, bits| b.d = random_scale(bits());
    simd: arm;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block (sub-block sums times their scales), scaled
/// in f32.
fn dot(w: &[BlockIQ4XS], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let k = |q: u8| KVALUES_IQ4NL[q as usize] as i32;
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut isum = 0i32;
        for (i, (qs, ys)) in x.qs.chunks_exact(16).zip(y.qs.chunks_exact(32)).enumerate() {
            let mut acc = 0i32;
            for j in 0..16 {
                acc += k(qs[j] & 0x0f) * ys[j] as i32 + k(qs[j] >> 4) * ys[j + 16] as i32;
            }
            isum += iq4_xs_scale(x, i) * acc;
        }
        sum += x.d.to_f32() * y.d * isum as f32;
    }
    sum
}
