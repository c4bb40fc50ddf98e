//! Weights repacked at load into groups of 8 interleaved rows (first type: Q5_0), so one
//! activation load, one scale conversion and one f32 multiply-add serve 8 rows.
//!
//! Layout of one (row group, block column), 8 rows × 32 quants: "register" `k` (0..8) holds
//! quants `4k..4k+4` of each row, row `r` at bytes `4r..4r+4`. A kernel broadcasts the 4
//! matching activation bytes and multiplies all 8 rows with one instruction; the 32-bit lane
//! `r` of the result belongs to row `r` (the same grouping the 4-byte `vpdpbusd` / `sdot`
//! instructions use). Quants are stored unsigned (Q5_0: 0..=31, the file's offset of 16 is
//! applied once per block as `-16 * sum(activations)`), so no sign trick is needed.
//!
//! Storage per (group, block), no bigger than the 8 original blocks (176 bytes for Q5_0):
//! - `qs`: 128 bytes, registers `k` and `k + 4` as low and high nibbles of the same 32 bytes;
//! - `qh`: 32 bytes, bit `k` of byte `i` is the 5th bit of register `k`'s byte `i`;
//! - `d`: the 8 rows' f16 scales.
//!
//! Rows past the matrix's end (the last group) are zero and never written out.

use half::f16;

use crate::quant::blocks::{BlockQ5_0, BlockQ8_0};

/// Rows per interleaved group.
pub const GROUP: usize = 8;

/// 32 bytes on a 32-byte boundary, so the kernels' vector loads never straddle a cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
pub struct Line32(pub [u8; 32]);

/// A Q5_0 matrix of `rows` × `k` repacked into 8-row groups.
pub struct Q5_0x8 {
    pub rows: usize,
    pub k: usize,
    /// Blocks per row (`k / 32`).
    pub nb: usize,
    /// `[group][block][4]` nibble lines.
    pub qs: Vec<Line32>,
    /// `[group][block]` high-bit lines.
    pub qh: Vec<Line32>,
    /// `[group][block][8]` row scales.
    pub d: Vec<[f16; GROUP]>,
}

impl std::fmt::Debug for Q5_0x8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Q5_0x8 {{ rows: {}, k: {} }}", self.rows, self.k)
    }
}

impl Q5_0x8 {
    /// Repacks `rows` rows of `w` (row-major, `k / 32` blocks per row).
    pub fn repack(w: &[BlockQ5_0], rows: usize, k: usize) -> Q5_0x8 {
        let nb = k / 32;
        assert_eq!(w.len(), rows * nb, "block count != rows x k/32");
        let groups = rows.div_ceil(GROUP);
        let mut qs = vec![Line32::default(); groups * nb * 4];
        let mut qh = vec![Line32::default(); groups * nb];
        let mut d = vec![[f16::ZERO; GROUP]; groups * nb];
        for g in 0..groups {
            for b in 0..nb {
                let gb = g * nb + b;
                for r in 0..GROUP.min(rows - g * GROUP) {
                    let x = &w[(g * GROUP + r) * nb + b];
                    d[gb][r] = x.d;
                    let hbits = u32::from_le_bytes(x.qh);
                    for i in 0..32 {
                        let nib = if i < 16 {
                            x.qs[i] & 15
                        } else {
                            x.qs[i - 16] >> 4
                        };
                        let hi = ((hbits >> i) & 1) as u8;
                        let (reg, byte) = (i / 4, 4 * r + i % 4);
                        qs[gb * 4 + reg % 4].0[byte] |= nib << (4 * (reg / 4));
                        qh[gb].0[byte] |= hi << reg;
                    }
                }
            }
        }
        Q5_0x8 {
            rows,
            k,
            nb,
            qs,
            qh,
            d,
        }
    }

    pub fn groups(&self) -> usize {
        self.rows.div_ceil(GROUP)
    }

    /// Quant `i` (0..32, unsigned 0..=31) of row `r` of group `g`, block `b`.
    #[inline]
    pub fn quant(&self, g: usize, b: usize, r: usize, i: usize) -> u8 {
        let gb = g * self.nb + b;
        let (reg, byte) = (i / 4, 4 * r + i % 4);
        let nib = (self.qs[gb * 4 + reg % 4].0[byte] >> (4 * (reg / 4))) & 15;
        let hi = (self.qh[gb].0[byte] >> reg) & 1;
        nib | hi << 4
    }
}

/// Sum of each activation block's quants: the kernels apply Q5_0's offset of 16 with it.
pub fn block_sums(a: &[BlockQ8_0]) -> Vec<i32> {
    a.iter()
        .map(|y| y.qs.iter().map(|&q| q as i32).sum())
        .collect()
}

/// Scalar twin of the SIMD kernels: `out[t][r]` = row `r` of group `g` · token `t`, with
/// exactly the integer sums of [`super::scalar::vec_dot_q5_0_q8_0`] per block.
pub fn q5_0x8_group(
    w: &Q5_0x8,
    g: usize,
    a: &[&[BlockQ8_0]],
    sums: &[&[i32]],
    out: &mut [[f32; GROUP]],
) {
    for ((y, s), o) in a.iter().zip(sums).zip(out.iter_mut()) {
        let mut acc = [0f32; GROUP];
        for b in 0..w.nb {
            let (yb, gb) = (&y[b], g * w.nb + b);
            let dy = yb.d.to_f32();
            for (r, acc) in acc.iter_mut().enumerate() {
                let mut sumi = 0i32;
                for i in 0..32 {
                    sumi += w.quant(g, b, r, i) as i32 * yb.qs[i] as i32;
                }
                let sumi = sumi - 16 * s[b];
                *acc += sumi as f32 * (w.d[gb][r].to_f32() * dy);
            }
        }
        *o = acc;
    }
}
