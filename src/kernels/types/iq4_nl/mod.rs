//! IQ4_NL: 32 weights per block, `w = d * KVALUES_IQ4NL[q]` with `q` a nibble indexing a
//! non-linear codebook; Q8_0 activations. Its kernels are the shared [`codebook4`] ones:
//! repacked at load into 8-row groups on x86; in place on aarch64 (a NEON dot kernel per
//! token, i8mm tiles for batches).

#[cfg(target_arch = "aarch64")]
use super::codebook4::neon;
use super::codebook4::{self, x8};
use super::{random_scale, weight_type};
use crate::quant::blocks::{BlockIQ4NL, BlockQ8_0};
use crate::quant::dequant::dequantize_iq4_nl;

weight_type! {
    /// IQ4_NL weights × Q8_0 activations.
    IQ4NL = IQ4_NL, BlockIQ4NL, BlockQ8_0, 32;
    dot: codebook4::dot, dequantize: dequantize_iq4_nl,
    scales: |b, bits| b.d = random_scale(bits());
    arm {
        Neon => neon::Kernels::<BlockIQ4NL>::BASE,
        Dotprod => neon::Kernels::<BlockIQ4NL>::DOTPROD,
        I8mm => neon::Kernels::<BlockIQ4NL>::I8MM,
    }
    layout: LAYOUT;
}

x8::codebook_layout!(IQ4NL, |x| Some(x.d));
