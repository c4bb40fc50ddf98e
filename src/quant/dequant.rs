//! Scalar reference dequantization: the ground truth that SIMD kernels are tested against.
//!
//! Every function computes in f32 with the same operation order as gguf-py's numpy code (and
//! ggml's `dequantize_row_*`), one IEEE rounding per operation and no fused multiply-add, so the
//! results are bit-identical to both (`tests/quant_fixtures.rs` checks this against gguf-py).
//! Scale fields are f16 widened exactly to f32 first.
//!
//! Block-type functions for the K-quants live in [`super::dequant_k`] and are re-exported here.

use std::fmt;

use half::f16;

pub use super::dequant_k::{
    dequantize_q2_k, dequantize_q3_k, dequantize_q4_k, dequantize_q5_k, dequantize_q6_k,
    get_scale_min_k4, unpack_q3_k_scales,
};

use super::blocks::{
    read_block, Block, BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ4_0, BlockQ4_1, BlockQ5_0,
    BlockQ5_1, BlockQ8_0, CodebookBlock, KVALUES_IQ4NL,
};
use super::types::GgmlType;

/// Why [`dequantize_row`] refused its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DequantError {
    /// No scalar dequantizer exists for this type.
    Unsupported(GgmlType),
    /// `dst.len()` is not a whole number of blocks of `ty`.
    PartialBlock {
        ty: GgmlType,
        n: usize,
        block_size: usize,
    },
    /// `src` is not exactly the bytes of `dst.len()` elements (`expected` is `None` if that
    /// byte count overflows `usize`).
    LengthMismatch {
        ty: GgmlType,
        n: usize,
        src_len: usize,
        expected: Option<usize>,
    },
}

impl fmt::Display for DequantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DequantError::Unsupported(ty) => write!(f, "dequantization of {ty} is not supported"),
            DequantError::PartialBlock { ty, n, block_size } => write!(
                f,
                "{n} elements is not a whole number of {ty} blocks of {block_size}"
            ),
            DequantError::LengthMismatch {
                ty,
                n,
                src_len,
                expected: Some(expected),
            } => write!(f, "{n} {ty} elements need {expected} bytes, got {src_len}"),
            DequantError::LengthMismatch { ty, n, src_len, .. } => write!(
                f,
                "{n} {ty} elements need more bytes than fit in usize, got {src_len}"
            ),
        }
    }
}

impl std::error::Error for DequantError {}

/// Whether [`dequantize_row`] supports `ty`.
pub fn is_supported(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16
            | BF16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | IQ4_NL
            | IQ4_XS
            | MXFP4
    )
}

/// Dequantizes `dst.len()` elements of type `ty` stored in `src` (raw GGUF bytes, any alignment).
///
/// `src.len()` must be exactly the byte size of `dst.len()` elements, and `dst.len()` a whole
/// number of blocks. Never panics; on error `dst` is left untouched.
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), DequantError> {
    if !is_supported(ty) {
        return Err(DequantError::Unsupported(ty));
    }
    let (block_size, type_size) = ty.block_geometry();
    let n = dst.len();
    if !n.is_multiple_of(block_size) {
        return Err(DequantError::PartialBlock { ty, n, block_size });
    }
    let expected = (n / block_size).checked_mul(type_size);
    if expected != Some(src.len()) {
        return Err(DequantError::LengthMismatch {
            ty,
            n,
            src_len: src.len(),
            expected,
        });
    }

    use GgmlType::*;
    match ty {
        F32 => {
            for (x, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        F16 => {
            for (x, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *x = f16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        BF16 => {
            // bf16 is the top half of an f32: widening is a shift, exact for every pattern.
            for (x, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *x = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
            }
        }
        Q4_0 => for_each_block(src, dst, dequantize_q4_0),
        Q4_1 => for_each_block(src, dst, dequantize_q4_1),
        Q5_0 => for_each_block(src, dst, dequantize_q5_0),
        Q5_1 => for_each_block(src, dst, dequantize_q5_1),
        Q8_0 => for_each_block(src, dst, dequantize_q8_0),
        IQ4_NL => for_each_block(src, dst, dequantize_iq4_nl),
        IQ4_XS => for_each_block(src, dst, dequantize_iq4_xs),
        MXFP4 => for_each_block(src, dst, dequantize_mxfp4),
        Q2_K => for_each_block(src, dst, dequantize_q2_k),
        Q3_K => for_each_block(src, dst, dequantize_q3_k),
        Q4_K => for_each_block(src, dst, dequantize_q4_k),
        Q5_K => for_each_block(src, dst, dequantize_q5_k),
        Q6_K => for_each_block(src, dst, dequantize_q6_k),
        // `is_supported` already rejected everything else.
        _ => return Err(DequantError::Unsupported(ty)),
    }
    Ok(())
}

/// Runs `f` over each block of `src` and its `N` outputs. Lengths were checked by the caller;
/// blocks are copied out with an unaligned read because GGUF data need not be 2-aligned here.
fn for_each_block<B: Block, const N: usize>(src: &[u8], dst: &mut [f32], f: fn(&B, &mut [f32; N])) {
    let size = std::mem::size_of::<B>();
    for (bytes, out) in src.chunks_exact(size).zip(dst.chunks_exact_mut(N)) {
        if let (Some(block), Ok(out)) = (read_block::<B>(bytes), <&mut [f32; N]>::try_from(out)) {
            f(&block, out);
        }
    }
}

/// Q4_0: `out[i] = d * (q[i] - 8)`, where `q[i]` is the low nibble of `qs[i]` for `i < 16` and
/// the high nibble of `qs[i - 16]` for `i >= 16`.
pub fn dequantize_q4_0(block: &BlockQ4_0, out: &mut [f32; 32]) {
    let d = block.d.to_f32();
    for (j, &byte) in block.qs.iter().enumerate() {
        out[j] = d * ((byte & 0x0F) as i32 - 8) as f32;
        out[j + 16] = d * ((byte >> 4) as i32 - 8) as f32;
    }
}

/// Q4_1: `out[i] = d * q[i] + m`, with `q[i]` unpacked as in Q4_0 (no offset).
pub fn dequantize_q4_1(block: &BlockQ4_1, out: &mut [f32; 32]) {
    let d = block.d.to_f32();
    let m = block.m.to_f32();
    for (j, &byte) in block.qs.iter().enumerate() {
        out[j] = d * (byte & 0x0F) as f32 + m;
        out[j + 16] = d * (byte >> 4) as f32 + m;
    }
}

/// The 5th bit of element `i` of a Q5_0/Q5_1 block: bit `i` of `qh` read as a LE u32, already
/// shifted to bit position 4.
#[inline]
fn q5_high_bit(qh: u32, i: usize) -> u8 {
    (((qh >> i) & 1) << 4) as u8
}

/// Q5_0: `out[i] = d * (q[i] - 16)`, where `q[i]` is the Q4_0 nibble of element `i` plus
/// `16 * bit i of qh` (qh read as a little-endian u32).
pub fn dequantize_q5_0(block: &BlockQ5_0, out: &mut [f32; 32]) {
    let d = block.d.to_f32();
    let qh = u32::from_le_bytes(block.qh);
    for (j, &byte) in block.qs.iter().enumerate() {
        let lo = (byte & 0x0F) | q5_high_bit(qh, j);
        let hi = (byte >> 4) | q5_high_bit(qh, j + 16);
        out[j] = d * (lo as i32 - 16) as f32;
        out[j + 16] = d * (hi as i32 - 16) as f32;
    }
}

/// Q5_1: `out[i] = d * q[i] + m`, with the 5-bit `q[i]` unpacked as in Q5_0 (no offset).
pub fn dequantize_q5_1(block: &BlockQ5_1, out: &mut [f32; 32]) {
    let d = block.d.to_f32();
    let m = block.m.to_f32();
    let qh = u32::from_le_bytes(block.qh);
    for (j, &byte) in block.qs.iter().enumerate() {
        let lo = (byte & 0x0F) | q5_high_bit(qh, j);
        let hi = (byte >> 4) | q5_high_bit(qh, j + 16);
        out[j] = d * lo as f32 + m;
        out[j + 16] = d * hi as f32 + m;
    }
}

/// Q8_0: `out[i] = d * qs[i]` (qs signed).
pub fn dequantize_q8_0(block: &BlockQ8_0, out: &mut [f32; 32]) {
    let d = block.d.to_f32();
    for (o, &q) in out.iter_mut().zip(block.qs.iter()) {
        *o = d * q as f32;
    }
}

/// IQ4_NL and MXFP4: `out[i] = scale * CODEBOOK[q[i]]`, with the 4-bit index `q[i]` unpacked
/// as in Q4_0.
pub fn dequantize_codebook<B: CodebookBlock>(block: &B, out: &mut [f32; 32]) {
    let d = block.scale();
    for (j, &byte) in block.qs().iter().enumerate() {
        out[j] = d * B::CODEBOOK[(byte & 0x0F) as usize] as f32;
        out[j + 16] = d * B::CODEBOOK[(byte >> 4) as usize] as f32;
    }
}

/// IQ4_NL: `out[i] = d * KVALUES_IQ4NL[q[i]]`.
pub fn dequantize_iq4_nl(block: &BlockIQ4NL, out: &mut [f32; 32]) {
    dequantize_codebook(block, out)
}

/// MXFP4: `out[i] = 2^(e - 128) * KVALUES_MXFP4[q[i]]`.
pub fn dequantize_mxfp4(block: &BlockMXFP4, out: &mut [f32; 32]) {
    dequantize_codebook(block, out)
}

/// The 6-bit scale of sub-block `i` of an IQ4_XS block, offset by 32 (so in -32..32).
pub fn iq4_xs_scale(block: &BlockIQ4XS, i: usize) -> i32 {
    let lo = (block.scales_l[i / 2] >> (4 * (i % 2))) & 0x0F;
    let hi = ((block.scales_h >> (2 * i)) & 3) as u8;
    (lo | (hi << 4)) as i32 - 32
}

/// IQ4_XS: sub-block i of 32 is IQ4_NL with scale `d * iq4_xs_scale(i)`.
pub fn dequantize_iq4_xs(block: &BlockIQ4XS, out: &mut [f32; 256]) {
    let d = block.d.to_f32();
    for (i, (qs, out)) in block
        .qs
        .chunks_exact(16)
        .zip(out.chunks_exact_mut(32))
        .enumerate()
    {
        let dl = d * iq4_xs_scale(block, i) as f32;
        for (j, &byte) in qs.iter().enumerate() {
            out[j] = dl * KVALUES_IQ4NL[(byte & 0x0F) as usize] as f32;
            out[j + 16] = dl * KVALUES_IQ4NL[(byte >> 4) as usize] as f32;
        }
    }
}
