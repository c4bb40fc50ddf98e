//! Q5_1: 32 weights per block, `w = d * q + m` with a 5-bit `q` (the 5th bits in `qh`); Q8_0
//! activations (the minimum multiplies the activations' block sum).
//! Repacked at load into 8-row groups on x86 ([`x8`]); in place on aarch64 (Q4_1's NEON
//! dot kernel per token and i8mm tiles, with the fifth bits).

#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;
use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ5_1, BlockQ8_0};
use crate::quant::dequant::dequantize_q5_1;

weight_type! {
    /// Q5_1 weights × Q8_0 activations.
    Q5_1 = Q5_1, BlockQ5_1, BlockQ8_0, 32;
    dot: dot, dequantize: dequantize_q5_1, scales: |b, bits| (b.d, b.m) = (random_scale(bits()), random_scale(bits()));
    simd: arm;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block (`Σ q a` and `Σ a`), scaled in f32.
fn dot(w: &[BlockQ5_1], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let qh = u32::from_le_bytes(x.qh);
        let (mut sumi, mut suma) = (0i32, 0i32);
        for j in 0..16 {
            let lo = (x.qs[j] & 0x0f) as i32 | (((qh >> j) & 1) << 4) as i32;
            let hi = (x.qs[j] >> 4) as i32 | (((qh >> (j + 16)) & 1) << 4) as i32;
            let (a0, a1) = (y.qs[j] as i32, y.qs[j + 16] as i32);
            sumi += lo * a0 + hi * a1;
            suma += a0 + a1;
        }
        let dy = y.d.to_f32();
        sum += sumi as f32 * (x.d.to_f32() * dy) + x.m.to_f32() * (dy * suma as f32);
    }
    sum
}
