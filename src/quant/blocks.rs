//! `#[repr(C)]` block layouts, byte-identical to ggml's, so weights are used in place from the
//! mapped file. Every block has alignment 1 or 2 (f16 fields), so a `&[u8]` at an even offset
//! can be reinterpreted as a slice of blocks (see [`cast_blocks`]).

use half::f16;

use super::types::QK_K;

/// 32 weights: `w = d * (q - 8)`, q in 0..16; low nibbles hold elements 0..16, high 16..32.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_0 {
    pub d: f16,
    pub qs: [u8; 16],
}

/// 32 weights: `w = d * q + m`, q in 0..16.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_1 {
    pub d: f16,
    pub m: f16,
    pub qs: [u8; 16],
}

/// 32 weights: `w = d * (q - 16)`, q 5 bits: low nibble in `qs`, 5th bit in `qh` (bit j of
/// element j).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5_0 {
    pub d: f16,
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

/// 32 weights: `w = d * q + m`, q 5 bits.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

/// 32 values: `w = d * q`, q an i8. Also the activation format for Q4_0/Q5_0/Q8_0 dot products.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; 32],
}

/// 256 weights in 16 sub-blocks of 16: 2-bit q, 4-bit scale and min per sub-block.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: f16,
    pub dmin: f16,
}

/// 256 weights in 16 sub-blocks of 16: 3-bit q (high bit in `hmask`), 6-bit scales.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: f16,
}

/// 256 weights in 8 sub-blocks of 32: `w = d * sc * q - dmin * m`, 6-bit sc/m packed in `scales`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

/// Like Q4_K with a 5th bit per weight in `qh`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

/// 256 weights in 16 sub-blocks of 16: `w = d * scale * (q - 32)`, q 6 bits (4 in `ql`, 2 in `qh`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: f16,
}

/// Activation format for K-quant dot products: 256 i8 values, one f32 scale, and the sums of
/// each group of 16 values (used to apply the K-quants' minimums without a second pass).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

/// 32 weights: `w = d * KVALUES_IQ4NL[q]`, a non-linear 4-bit codebook.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIQ4NL {
    pub d: f16,
    pub qs: [u8; 16],
}

/// 256 weights in 8 sub-blocks of 32: `w = d * (ls - 32) * KVALUES_IQ4NL[q]`, with the 6-bit
/// sub-block scale `ls` split into a low nibble (`scales_l`, two per byte) and two high bits
/// (`scales_h`, bits `2i..2i+2` for sub-block i); quants packed as in IQ4_NL per sub-block.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIQ4XS {
    pub d: f16,
    pub scales_h: u16,
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

/// 32 weights of OCP MX FP4: `w = 2^(e - 128) * KVALUES_MXFP4[q]`, with `e` a shared E8M0
/// exponent and `q` an E2M1 code (the codebook holds twice the E2M1 values, so the scale is
/// half the E8M0 one, as ggml stores it); quants packed as in IQ4_NL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockMXFP4 {
    pub e: u8,
    pub qs: [u8; 16],
}

/// The E2M1 values doubled: an MXFP4 code is a sign bit over 0, 0.5, 1, 1.5, 2, 3, 4, 6.
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// `2^(e - 128)`: half the E8M0 scale `e` (exact, subnormal below e = 2).
#[inline]
pub fn e8m0_half(e: u8) -> f32 {
    match e {
        0 | 1 => f32::from_bits(0x0020_0000 << e),
        _ => f32::from_bits(((e as u32) - 1) << 23),
    }
}

/// A block of 32 four-bit codes into a signed 16-entry codebook under one scale (IQ4_NL,
/// MXFP4): code `j` in the low nibble of `qs[j]`, code `j + 16` in its high nibble.
pub trait CodebookBlock: Block + Send + Sync + 'static {
    const CODEBOOK: [i8; 16];
    fn qs(&self) -> &[u8; 16];
    fn scale(&self) -> f32;
}

impl CodebookBlock for BlockIQ4NL {
    const CODEBOOK: [i8; 16] = KVALUES_IQ4NL;
    fn qs(&self) -> &[u8; 16] {
        &self.qs
    }
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
}

impl CodebookBlock for BlockMXFP4 {
    const CODEBOOK: [i8; 16] = KVALUES_MXFP4;
    fn qs(&self) -> &[u8; 16] {
        &self.qs
    }
    fn scale(&self) -> f32 {
        e8m0_half(self.e)
    }
}

/// The IQ4_NL codebook.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

const _: () = {
    use std::mem::size_of;
    assert!(size_of::<BlockQ4_0>() == 18);
    assert!(size_of::<BlockQ4_1>() == 20);
    assert!(size_of::<BlockQ5_0>() == 22);
    assert!(size_of::<BlockQ5_1>() == 24);
    assert!(size_of::<BlockQ8_0>() == 34);
    assert!(size_of::<BlockQ2K>() == 84);
    assert!(size_of::<BlockQ3K>() == 110);
    assert!(size_of::<BlockQ4K>() == 144);
    assert!(size_of::<BlockQ5K>() == 176);
    assert!(size_of::<BlockQ6K>() == 210);
    assert!(size_of::<BlockQ8K>() == 292);
    assert!(size_of::<BlockIQ4NL>() == 18);
    assert!(size_of::<BlockMXFP4>() == 17);
    assert!(size_of::<BlockIQ4XS>() == 136);
};

/// Marker for plain-old-data blocks that may be viewed from raw bytes.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, contain only integer/f16/f32 fields (every bit pattern is
/// valid) and have no padding.
pub unsafe trait Block: Copy {}

// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ4_0 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ4_1 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ5_0 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ5_1 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ8_0 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ2K {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ3K {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ4K {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ5K {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ6K {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockQ8K {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockIQ4NL {}
// SAFETY: plain data of integers, `repr(C)` without padding.
unsafe impl Block for BlockMXFP4 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for BlockIQ4XS {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for f16 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for half::bf16 {}
// SAFETY: plain data of integers and f16/bf16/f32 fields, `repr(C)` without padding.
unsafe impl Block for f32 {}

/// Views `bytes` as blocks. Returns `None` if the length is not a multiple of the block size or
/// the pointer is not aligned for `B`.
pub fn cast_blocks<B: Block>(bytes: &[u8]) -> Option<&[B]> {
    let size = std::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size)
        || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<B>())
    {
        return None;
    }
    // SAFETY: length and alignment checked above; `Block` guarantees every bit pattern is valid.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const B, bytes.len() / size) })
}

/// Views `bytes` as mutable blocks, under the same conditions as [`cast_blocks`].
pub fn cast_blocks_mut<B: Block>(bytes: &mut [u8]) -> Option<&mut [B]> {
    let size = std::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size)
        || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<B>())
    {
        return None;
    }
    // SAFETY: as in `cast_blocks`; the borrow is exclusive, and any value written is valid
    // bytes.
    Some(unsafe {
        std::slice::from_raw_parts_mut(bytes.as_mut_ptr() as *mut B, bytes.len() / size)
    })
}

/// Views blocks as their raw bytes.
pub fn block_bytes<B: Block>(blocks: &[B]) -> &[u8] {
    // SAFETY: `Block` types have no padding, so every byte is initialised.
    unsafe {
        std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks))
    }
}

/// Copies one block out of `bytes` regardless of alignment. Returns `None` unless `bytes` is
/// exactly one block long.
#[inline]
pub fn read_block<B: Block>(bytes: &[u8]) -> Option<B> {
    if bytes.len() != std::mem::size_of::<B>() {
        return None;
    }
    // SAFETY: length checked above; `Block` guarantees every bit pattern is a valid `B`, and
    // `read_unaligned` has no alignment requirement.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const B) })
}
