//! Q6_K: 256 weights in 16 sub-blocks of 16, `w = d * scale * (q - 32)` with `q` 6 bits (4 in
//! `ql`, 2 in `qh`) and a signed 8-bit scale per sub-block; Q8_K activations. Repacked at load
//! into 8-row groups on x86 ([`x8`]); in place elsewhere (a dot kernel per token, tiles for
//! batches).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockQ6K, BlockQ8K};
use crate::quant::dequant::dequantize_q6_k;

weight_type! {
    /// Q6_K weights × Q8_K activations.
    Q6K = Q6_K, BlockQ6K, BlockQ8K, 256;
    dot: dot, dequantize: dequantize_q6_k, scales: |b, bits| b.d = random_scale(bits());
    simd: all;
    layout: x8::LAYOUT;
}

/// The reference: exact integer sums per block, scaled in f32 as llama.cpp's generic kernel.
fn dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut isum = 0i32;
        for h in 0..2 {
            let ql = &x.ql[64 * h..64 * h + 64];
            let qh = &x.qh[32 * h..32 * h + 32];
            let q8 = &y.qs[128 * h..128 * h + 128];
            let mut acc = [0i32; 8];
            for l in 0..32 {
                let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                let g = l / 16;
                acc[g] += q1 * q8[l] as i32;
                acc[2 + g] += q2 * q8[l + 32] as i32;
                acc[4 + g] += q3 * q8[l + 64] as i32;
                acc[6 + g] += q4 * q8[l + 96] as i32;
            }
            for (g, &s) in acc.iter().enumerate() {
                isum += x.scales[8 * h + g] as i32 * s;
            }
        }
        sum += x.d.to_f32() * y.d * isum as f32;
    }
    sum
}
