//! MXFP4: per block of 32 the shared exponent of its largest magnitude (so that magnitude
//! lands in the top E2M1 binade, 4..8 times the half scale), then each weight's nearest
//! codebook value (the first on a tie), as ggml's reference quantizer does.

use crate::quant::blocks::{e8m0_half, BlockMXFP4, KVALUES_MXFP4};

pub(super) fn mxfp4(x: &[f32; 32]) -> BlockMXFP4 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let e = if amax > 0.0 {
        (amax.log2().floor() - 2.0 + 127.0).clamp(0.0, 255.0) as u8
    } else {
        0
    };
    let d = e8m0_half(e);
    let nearest = |v: f32| {
        let err = |i: usize| (KVALUES_MXFP4[i] as f32 * d - v).abs();
        (1..16).fold(0, |best, i| if err(i) < err(best) { i } else { best }) as u8
    };
    BlockMXFP4 {
        e,
        qs: std::array::from_fn(|j| nearest(x[j]) | nearest(x[j + 16]) << 4),
    }
}
