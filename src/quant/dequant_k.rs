//! Scalar reference dequantization of the K-quants (256-element super-blocks).
//!
//! Shared layout conventions, with element index `e` in `0..256`:
//! - 2-bit fields (`qs` of Q2_K/Q3_K, `qh` of Q6_K) pack 128 elements per 32 bytes: element
//!   `e = 128*h + 32*j + l` sits in bits `2j..2j+2` of byte `32*h + l`.
//! - Q4_K/Q5_K nibbles pack 64 elements per 32 bytes: sub-block `s` (32 elements) uses the low
//!   nibble of `qs[32*(s/2) + l]` when `s` is even and the high nibble when odd.
//! - 1-bit fields (`hmask` of Q3_K, `qh` of Q5_K) use bit `e / 32` of byte `e % 32`.
//!
//! As in gguf-py and ggml, the per-sub-block factor (`d * scale`) is rounded to f32 before it
//! multiplies `q`; changing that order would change the last bit.

use super::blocks::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use super::types::QK_K;

/// The 6-bit scale and min of sub-block `j` (`0..8`) of a Q4_K/Q5_K block.
///
/// Layout of the 12 bytes (`sc`/`m` for sub-blocks 0..4 in the low 6 bits of bytes 0..4 / 4..8;
/// for sub-blocks 4..8 the low 4 bits in the nibbles of bytes 8..12 and the high 2 bits in the
/// top bits of bytes 0..4 / 4..8):
/// ```text
///  j < 4: sc = q[j] & 63,                          m = q[j + 4] & 63
///  j ≥ 4: sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4,  m = (q[j + 4] >> 4) | (q[j] >> 6) << 4
/// ```
///
/// # Panics
/// If `j >= 8`.
#[inline]
pub fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    assert!(j < 8, "Q4_K/Q5_K have 8 sub-blocks, got index {j}");
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Unpacks the 12-byte 6-bit scale/min field of Q4_K/Q5_K: returns `(scales, mins)` of the
/// 8 sub-blocks. Bytes 0..4 / 4..8 hold sc[0..4] / m[0..4] in their low 6 bits; bytes 8..12
/// hold the low nibbles of sc[4..8] (low) and m[4..8] (high), whose top 2 bits sit in the top
/// bits of bytes 0..4 / 4..8. Done on 32-bit words since every kernel calls this once per
/// super-block.
#[inline(always)]
pub fn unpack_k4_scales(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let w0 = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let w1 = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    let w2 = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let sc_lo = w0 & LOW6;
    let m_lo = w1 & LOW6;
    let sc_hi = (w2 & LOW4) | (((w0 >> 6) & TOP2) << 4);
    let m_hi = ((w2 >> 4) & LOW4) | (((w1 >> 6) & TOP2) << 4);
    let join = |a: u32, b: u32| (a as u64 | (b as u64) << 32).to_le_bytes();
    (join(sc_lo, sc_hi), join(m_lo, m_hi))
}

/// The 16 signed 6-bit scales of a Q3_K block, already offset by -32 (range `-32..32`).
///
/// Scale `i` has its low 4 bits in the low nibble of `scales[i]` (`i < 8`) or the high nibble of
/// `scales[i - 8]` (`i ≥ 8`), and its high 2 bits in bits `2*(i/4)..` of `scales[8 + i % 4]`.
#[inline]
pub fn unpack_q3_k_scales(scales: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let low = if i < 8 {
            scales[i] & 0x0F
        } else {
            scales[i - 8] >> 4
        };
        let high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// Q2_K: for sub-block `s` (16 elements) with `sc = scales[s]`:
/// `out[e] = (d * (sc & 15)) * q[e] - dmin * (sc >> 4)`, `q[e]` the 2-bit field of element `e`.
pub fn dequantize_q2_k(block: &BlockQ2K, out: &mut [f32; QK_K]) {
    let d = block.d.to_f32();
    let dmin = block.dmin.to_f32();
    for (s, chunk) in out.chunks_exact_mut(16).enumerate() {
        let sc = block.scales[s];
        let dl = d * (sc & 0x0F) as f32;
        let ml = dmin * (sc >> 4) as f32;
        for (k, o) in chunk.iter_mut().enumerate() {
            let e = s * 16 + k;
            let (h, j, l) = (e / 128, (e % 128) / 32, e % 32);
            let q = (block.qs[32 * h + l] >> (2 * j)) & 3;
            *o = dl * q as f32 - ml;
        }
    }
}

/// Q3_K: for sub-block `s` (16 elements) with signed scale `sc[s]` from
/// [`unpack_q3_k_scales`]: `out[e] = (d * sc[s]) * q[e]`, where
/// `q[e] = (2-bit field of qs) - 4 * (1 - hmask bit)`, range `-4..4`.
pub fn dequantize_q3_k(block: &BlockQ3K, out: &mut [f32; QK_K]) {
    let d = block.d.to_f32();
    let scales = unpack_q3_k_scales(&block.scales);
    for (s, chunk) in out.chunks_exact_mut(16).enumerate() {
        let dl = d * scales[s] as f32;
        for (k, o) in chunk.iter_mut().enumerate() {
            let e = s * 16 + k;
            let (h, j, l) = (e / 128, (e % 128) / 32, e % 32);
            let low = ((block.qs[32 * h + l] >> (2 * j)) & 3) as i32;
            // A set hmask bit means "no offset"; a clear one subtracts 4.
            let high = ((block.hmask[l] >> (e / 32)) & 1) as i32;
            let q = low - 4 * (1 - high);
            *o = dl * q as f32;
        }
    }
}

/// Q4_K: for sub-block `s` (32 elements) with `(sc, m) = get_scale_min_k4(s)`:
/// `out[e] = (d * sc) * q[e] - dmin * m`, `q[e]` a 4-bit nibble.
pub fn dequantize_q4_k(block: &BlockQ4K, out: &mut [f32; QK_K]) {
    let d = block.d.to_f32();
    let dmin = block.dmin.to_f32();
    for (s, chunk) in out.chunks_exact_mut(32).enumerate() {
        let (sc, m) = get_scale_min_k4(s, &block.scales);
        let d1 = d * sc as f32;
        let m1 = dmin * m as f32;
        let shift = 4 * (s % 2);
        let qs = &block.qs[32 * (s / 2)..32 * (s / 2) + 32];
        for (o, &byte) in chunk.iter_mut().zip(qs) {
            let q = (byte >> shift) & 0x0F;
            *o = d1 * q as f32 - m1;
        }
    }
}

/// Q5_K: as Q4_K with a 5th bit: `out[e] = (d * sc) * (q[e] + 16 * qh bit) - dmin * m`.
pub fn dequantize_q5_k(block: &BlockQ5K, out: &mut [f32; QK_K]) {
    let d = block.d.to_f32();
    let dmin = block.dmin.to_f32();
    for (s, chunk) in out.chunks_exact_mut(32).enumerate() {
        let (sc, m) = get_scale_min_k4(s, &block.scales);
        let d1 = d * sc as f32;
        let m1 = dmin * m as f32;
        let shift = 4 * (s % 2);
        let qs = &block.qs[32 * (s / 2)..32 * (s / 2) + 32];
        for (l, (o, &byte)) in chunk.iter_mut().zip(qs).enumerate() {
            let q = ((byte >> shift) & 0x0F) | (((block.qh[l] >> s) & 1) << 4);
            *o = d1 * q as f32 - m1;
        }
    }
}

/// Q6_K: for sub-block `s` (16 elements): `out[e] = (d * scales[s]) * (q[e] - 32)`, where the
/// 6-bit `q[e]` is a nibble of `ql` (element `e = 128*h + 64*k + p` uses nibble `k` of
/// `ql[64*h + p]`) plus the 2-bit field of `qh` shifted left by 4.
pub fn dequantize_q6_k(block: &BlockQ6K, out: &mut [f32; QK_K]) {
    let d = block.d.to_f32();
    for (s, chunk) in out.chunks_exact_mut(16).enumerate() {
        let dl = d * block.scales[s] as f32;
        for (k, o) in chunk.iter_mut().enumerate() {
            let e = s * 16 + k;
            let (h, r) = (e / 128, e % 128);
            let low = (block.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
            let high = (block.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            let q = (low | (high << 4)) as i32 - 32;
            *o = dl * q as f32;
        }
    }
}
