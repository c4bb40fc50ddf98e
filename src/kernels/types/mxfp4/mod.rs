//! MXFP4 (OCP microscaling FP4, gpt-oss's expert weights): 32 weights per block,
//! `w = 2^(e - 128) * KVALUES_MXFP4[q]` with `e` a shared E8M0 exponent and `q` an E2M1
//! code; Q8_0 activations. Its kernels are the shared [`codebook4`] ones: repacked at load into
//! 8-row groups on x86 (the power-of-two scale stored as an exact f16; a matrix with a block
//! whose scale f16 cannot hold stays in place), in place on aarch64 (NEON dot, i8mm tiles).

#[cfg(target_arch = "aarch64")]
use super::codebook4::neon;
use super::codebook4::{self, x8};
use super::weight_type;
use crate::quant::blocks::{BlockMXFP4, BlockQ8_0};
use crate::quant::dequant::dequantize_mxfp4;

weight_type! {
    /// MXFP4 weights × Q8_0 activations.
    MXFP4 = MXFP4, BlockMXFP4, BlockQ8_0, 32;
    dot: codebook4::dot, dequantize: dequantize_mxfp4,
    // Scales 2^-12 .. 2^-5, the range of real weights.
    scales: |b, bits| b.e = 116 + (bits() % 8) as u8;
    arm {
        Neon => neon::Kernels::<BlockMXFP4>::BASE,
        Dotprod => neon::Kernels::<BlockMXFP4>::DOTPROD,
        I8mm => neon::Kernels::<BlockMXFP4>::I8MM,
    }
    layout: LAYOUT;
}

x8::codebook_layout!(MXFP4, |x| exact_f16_scale(x.e));

/// The block's scale `2^(e - 128)` as an f16, which holds it exactly for `e` in 104..=143
/// (2^-24, the smallest subnormal, to 2^15); `None` outside.
pub(crate) fn exact_f16_scale(e: u8) -> Option<half::f16> {
    (104..=143)
        .contains(&e)
        .then(|| half::f16::from_f32(crate::quant::blocks::e8m0_half(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::packed::LayoutKind;
    use crate::quant::blocks::e8m0_half;

    #[test]
    fn f16_scales_are_exact_where_given() {
        for e in 0..=255u8 {
            let exact = e8m0_half(e);
            assert_eq!(exact, 2f64.powi(e as i32 - 128) as f32, "e = {e}");
            if let Some(h) = exact_f16_scale(e) {
                assert_eq!(h.to_f32(), exact, "e = {e}");
            }
        }
        assert!(exact_f16_scale(103).is_none() && exact_f16_scale(144).is_none());
    }

    #[test]
    fn a_scale_f16_cannot_hold_keeps_the_matrix_in_place() {
        use crate::kernels::types::WeightType;
        let (rows, k) = (8, 64);
        let mut blocks =
            MXFP4::random_blocks(rows * k / 32, &mut crate::kernels::types::test_bits(7));
        let repack = |b: &[BlockMXFP4]| {
            let bytes = crate::quant::blocks::block_bytes(b);
            LAYOUT.repack(bytes, rows, k, &|_| {}).is_some()
        };
        assert!(repack(&blocks));
        blocks[5].e = 150;
        assert!(!repack(&blocks));
    }
}
