//! Q4_1: 32 weights per block, `w = d * q + m` with `q` a nibble; Q8_0 activations (the
//! minimum multiplies the activations' block sum).
//! Repacked at load into 8-row groups on x86 ([`x8`]); in place on aarch64 (a NEON dot
//! kernel per token, i8mm tiles for batches, shared with Q5_1).

#[cfg(target_arch = "aarch64")]
pub(super) mod neon; // Q5_1 shares its kernels.
mod x8;
use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ4_1, BlockQ8_0};
use crate::quant::dequant::dequantize_q4_1;

weight_type! {
    /// Q4_1 weights × Q8_0 activations.
    Q4_1 = Q4_1, BlockQ4_1, BlockQ8_0, 32;
    dot: dot, dequantize: dequantize_q4_1, scales: |b, bits| (b.d, b.m) = (random_scale(bits()), random_scale(bits()));
    simd: arm;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block (`Σ q a` and `Σ a`), scaled in f32.
fn dot(w: &[BlockQ4_1], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (mut sumi, mut suma) = (0i32, 0i32);
        for j in 0..16 {
            let (lo, hi) = ((x.qs[j] & 0x0f) as i32, (x.qs[j] >> 4) as i32);
            let (a0, a1) = (y.qs[j] as i32, y.qs[j + 16] as i32);
            sumi += lo * a0 + hi * a1;
            suma += a0 + a1;
        }
        let dy = y.d.to_f32();
        sum += sumi as f32 * (x.d.to_f32() * dy) + x.m.to_f32() * (dy * suma as f32);
    }
    sum
}
