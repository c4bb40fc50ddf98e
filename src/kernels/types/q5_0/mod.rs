//! Q5_0: 32 weights per block, `w = d * (q - 16)` with `q` 5 bits (a nibble in `qs`, the fifth
//! bit in `qh`); Q8_0 activations. Repacked at load into 8-row groups on x86 ([`x8`]); in
//! place elsewhere (a dot kernel per token, tiles for batches).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ5_0, BlockQ8_0};
use crate::quant::dequant::dequantize_q5_0;

weight_type! {
    /// Q5_0 weights × Q8_0 activations.
    Q5_0 = Q5_0, BlockQ5_0, BlockQ8_0, 32;
    dot: dot, dequantize: dequantize_q5_0, scales: |b, bits| b.d = random_scale(bits());
    simd: all;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block, scaled in f32 as llama.cpp's generic kernel.
fn dot(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let qh = u32::from_le_bytes(x.qh);
        let mut sumi = 0i32;
        for j in 0..16 {
            let h0 = ((qh >> j) & 1) << 4;
            let h1 = ((qh >> (j + 16)) & 1) << 4;
            let lo = ((x.qs[j] & 0x0f) as u32 | h0) as i32 - 16;
            let hi = ((x.qs[j] >> 4) as u32 | h1) as i32 - 16;
            sumi += lo * y.qs[j] as i32 + hi * y.qs[j + 16] as i32;
        }
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}
