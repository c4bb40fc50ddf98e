//! Weight quantizers: f32 rows into ggml blocks, the inverse of [`super::dequant`].
//!
//! Each type follows the reference algorithm llama.cpp's `quantize_row_*_ref` uses without an
//! importance matrix (the same rounding, scale searches and packing), so a file Kolibri
//! quantizes holds the blocks llama-quantize would write, up to f32 rounding where a C
//! compiler fuses multiply-adds. One file per family: [`legacy`] (Q4_0..Q8_0), [`k_quants`]
//! (Q2_K..Q6_K), [`iq4`] (IQ4_NL, IQ4_XS), [`mxfp4`]; [`fit`] holds the scale searches they share.

mod fit;
mod iq4;
mod k_quants;
mod legacy;
mod mxfp4;

use half::{bf16, f16};

use super::blocks::{block_bytes, Block};
use super::types::GgmlType;

/// Why [`quantize_row`] refused its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantizeError {
    /// Kolibri has no quantizer for this type.
    Unsupported(GgmlType),
    /// The row is not a whole number of the type's blocks.
    PartialBlock {
        ty: GgmlType,
        n: usize,
        block_size: usize,
    },
    /// `out` is not the byte size of `x.len()` elements.
    OutputSize {
        ty: GgmlType,
        expected: usize,
        got: usize,
    },
}

impl std::fmt::Display for QuantizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuantizeError::Unsupported(ty) => write!(f, "quantizing to {ty} is not supported"),
            QuantizeError::PartialBlock { ty, n, block_size } => write!(
                f,
                "a row of {n} elements is not a whole number of {ty} blocks of {block_size}"
            ),
            QuantizeError::OutputSize { ty, expected, got } => {
                write!(f, "{ty} output needs {expected} bytes, got {got}")
            }
        }
    }
}

impl std::error::Error for QuantizeError {}

/// The types [`quantize_row`] writes.
pub const QUANTIZABLE: [GgmlType; 16] = {
    use GgmlType::*;
    [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
        MXFP4,
    ]
};

/// Whether [`quantize_row`] writes `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
    QUANTIZABLE.contains(&ty)
}

/// Quantizes `x` (whole blocks of `ty`) into `out`, exactly the bytes of `x.len()` elements.
/// Non-finite inputs give unspecified (but memory-safe) blocks; callers check them first.
pub fn quantize_row(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), QuantizeError> {
    if !can_quantize(ty) {
        return Err(QuantizeError::Unsupported(ty));
    }
    let (block_size, type_size) = ty.block_geometry();
    if !x.len().is_multiple_of(block_size) {
        return Err(QuantizeError::PartialBlock {
            ty,
            n: x.len(),
            block_size,
        });
    }
    let expected = x.len() / block_size * type_size;
    if out.len() != expected {
        return Err(QuantizeError::OutputSize {
            ty,
            expected,
            got: out.len(),
        });
    }
    use GgmlType::*;
    match ty {
        F32 => encode_elems(x, out, |v| v),
        F16 => encode_elems(x, out, f16::from_f32),
        BF16 => encode_elems(x, out, bf16::from_f32),
        Q4_0 => encode_blocks(x, out, legacy::q4_0),
        Q4_1 => encode_blocks(x, out, legacy::q4_1),
        Q5_0 => encode_blocks(x, out, legacy::q5_0),
        Q5_1 => encode_blocks(x, out, legacy::q5_1),
        Q8_0 => encode_blocks(x, out, legacy::q8_0),
        Q2_K => encode_blocks(x, out, k_quants::q2_k),
        Q3_K => encode_blocks(x, out, k_quants::q3_k),
        Q4_K => encode_blocks(x, out, k_quants::q4_k),
        Q5_K => encode_blocks(x, out, k_quants::q5_k),
        Q6_K => encode_blocks(x, out, k_quants::q6_k),
        IQ4_NL => encode_blocks(x, out, iq4::iq4_nl),
        IQ4_XS => encode_blocks(x, out, iq4::iq4_xs),
        MXFP4 => encode_blocks(x, out, mxfp4::mxfp4),
        _ => return Err(QuantizeError::Unsupported(ty)),
    }
    Ok(())
}

/// Q4_0 blocks of `x` with fitted scales (less error than [`quantize_row`]'s reference
/// rounding; for KV caches). `x` holds 32 values per block of `out`.
pub fn quantize_row_q4_0_fitted(x: &[f32], out: &mut [crate::quant::blocks::BlockQ4_0]) {
    assert_eq!(x.len(), out.len() * 32, "32 values per Q4_0 block");
    for (x, o) in x.chunks_exact(32).zip(out) {
        *o = legacy::q4_0_fitted(x.try_into().expect("32 values"));
    }
}

/// One element per "block" (the float types).
fn encode_elems<E: Block>(x: &[f32], out: &mut [u8], f: impl Fn(f32) -> E) {
    let size = std::mem::size_of::<E>();
    for (v, o) in x.iter().zip(out.chunks_exact_mut(size)) {
        o.copy_from_slice(block_bytes(&[f(*v)]));
    }
}

/// `f` per block of `N` inputs, each written as its bytes (lengths checked by the caller).
fn encode_blocks<B: Block, const N: usize>(x: &[f32], out: &mut [u8], f: fn(&[f32; N]) -> B) {
    let size = std::mem::size_of::<B>();
    for (xb, o) in x.chunks_exact(N).zip(out.chunks_exact_mut(size)) {
        let xb: &[f32; N] = xb.try_into().expect("whole blocks");
        o.copy_from_slice(block_bytes(&[f(xb)]));
    }
}

/// Nearest integer, ties to even, for |v| < 2^22 (ggml's `nearest_int` float trick).
#[inline]
pub(crate) fn nearest_int(v: f32) -> i32 {
    debug_assert!(v.abs() < 4_194_304.0 || !v.is_finite());
    let bits = (v + 12_582_912.0).to_bits() as i32;
    (bits & 0x007F_FFFF) - 0x0040_0000
}

/// `f16` round trip: the scale a block stores, as the dequantizer will read it.
#[inline]
fn f16_round(v: f32) -> (f16, f32) {
    let h = f16::from_f32(v);
    (h, h.to_f32())
}

#[cfg(test)]
mod tests;
