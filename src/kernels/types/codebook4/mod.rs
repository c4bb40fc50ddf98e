//! What IQ4_NL and MXFP4 share: 32 four-bit codes per block indexing a signed 16-entry
//! codebook under one scale ([`CodebookBlock`]); only the codebook and the scale's encoding
//! differ. The scalar dot, the NEON kernels and the x86 8-row layout are written once here.

#[cfg(target_arch = "aarch64")]
pub(super) mod neon;
pub(super) mod x8;

use crate::quant::blocks::{BlockQ8_0, CodebookBlock};

/// The reference: exact integer sums of codebook values per block, scaled in f32 by
/// `scale_w · d_a` (llama.cpp's order; for MXFP4 the power-of-two scale makes both orders one).
pub(super) fn dot<B: CodebookBlock>(w: &[B], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let k = |q: u8| B::CODEBOOK[q as usize] as i32;
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for (j, &q) in x.qs().iter().enumerate() {
            sumi += k(q & 0x0f) * y.qs[j] as i32 + k(q >> 4) * y.qs[j + 16] as i32;
        }
        sum += sumi as f32 * (x.scale() * y.d.to_f32());
    }
    sum
}
