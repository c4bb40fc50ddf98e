//! IQ4_NL: 32 weights per block, `w = d * KVALUES_IQ4NL[q]` with `q` a nibble indexing a
//! non-linear codebook; Q8_0 activations.
//! Repacked at load into 8-row groups on x86 ([`x8`]); in place on aarch64 (a NEON dot
//! kernel per token, i8mm tiles for batches).

#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;
use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockIQ4NL, BlockQ8_0, KVALUES_IQ4NL};
use crate::quant::dequant::dequantize_iq4_nl;

weight_type! {
    /// IQ4_NL weights × Q8_0 activations.
    IQ4NL = IQ4_NL, BlockIQ4NL, BlockQ8_0, 32;
    dot: dot, dequantize: dequantize_iq4_nl, scales: |b, bits| b.d = random_scale(bits());
    simd: arm;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums of codebook values per block, scaled in f32.
fn dot(w: &[BlockIQ4NL], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let k = |q: u8| KVALUES_IQ4NL[q as usize] as i32;
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += k(x.qs[j] & 0x0f) * y.qs[j] as i32 + k(x.qs[j] >> 4) * y.qs[j + 16] as i32;
        }
        sum += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sum
}
