//! Weights repacked at load into groups of 8 interleaved rows (Q5_0 and Q8_0), so one
//! activation load, one scale conversion and one f32 multiply-add serve 8 rows.
//!
//! Layout of one (row group, block column), 8 rows × 32 quants: "register" `k` (0..8) holds
//! quants `4k..4k+4` of each row, row `r` at bytes `4r..4r+4`. A kernel broadcasts the 4
//! matching activation bytes and multiplies all 8 rows with one instruction; the 32-bit lane
//! `r` of the result belongs to row `r` (the same grouping the 4-byte `vpdpbusd` / `sdot`
//! instructions use). Quants are stored unsigned (Q5_0: 0..=31, the file's offset of 16 is
//! applied once per block as `-16 * sum(activations)`), so no sign trick is needed.
//!
//! Q8_0 stays signed (the kernel uses |w| · sign(a, w), exact for every i8 weight) and is stored
//! as 8 registers (256 bytes) plus the 8 scales per (group, block).
//!
//! Q5_0 storage per (group, block), no bigger than the 8 original blocks (176 bytes):
//! - `qs`: 128 bytes, registers `k` and `k + 4` as low and high nibbles of the same 32 bytes;
//! - `qh`: 32 bytes, bit `k` of byte `i` is the 5th bit of register `k`'s byte `i`;
//! - `d`: the 8 rows' f16 scales.
//!
//! Rows past the matrix's end (the last group) are zero and never written out.

use half::f16;
use rayon::prelude::*;

use crate::quant::blocks::{cast_blocks, BlockQ5_0, BlockQ8_0};
use crate::quant::GgmlType;

/// Rows per interleaved group.
pub const GROUP: usize = 8;

/// Told which source bytes a repack has finished with (the loader releases their pages, so the
/// original and the repacked copy are never both resident).
pub type Release = dyn Fn(&[u8]) + Sync;

/// Groups per parallel repack chunk: about 1 MiB of source, so releasing whole pages inside
/// each chunk leaves little behind.
fn chunk_groups(group_bytes: usize) -> usize {
    ((1 << 20) / group_bytes.max(1)).max(1)
}

/// Types whose all-zero bit pattern is a valid value.
pub trait Zeroable: Copy {}
impl Zeroable for Line32 {}
impl Zeroable for [f16; GROUP] {}

/// `n` zeros in a fresh anonymous mapping: page-aligned, and its pages stay untouched (not
/// resident) until the repack writes them, so the resident total grows only as fast as the
/// source is released. (The heap's zeroed allocations write every byte for alignments over
/// 16.)
pub struct Zeroed<T> {
    map: Option<memmap2::MmapMut>,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Zeroable> Zeroed<T> {
    fn new(len: usize) -> Zeroed<T> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("repacked matrix too large");
        let map = (bytes > 0).then(|| {
            memmap2::MmapMut::map_anon(bytes).unwrap_or_else(|e| {
                panic!("cannot allocate {bytes} bytes for repacked weights: {e}")
            })
        });
        Zeroed {
            map,
            len,
            _t: std::marker::PhantomData,
        }
    }
}

impl<T: Zeroable> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.map {
            // SAFETY: the mapping holds len Ts, page-aligned (>= align_of::<T>()), all-zero or
            // written as T; Zeroable says zero bits are a valid T.
            Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr() as *const T, self.len) },
            None => &[],
        }
    }
}

impl<T: Zeroable> std::ops::DerefMut for Zeroed<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.map {
            // SAFETY: as in deref; the mapping is uniquely borrowed.
            Some(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr() as *mut T, self.len)
            },
            None => &mut [],
        }
    }
}

fn as_bytes<B>(blocks: &[B]) -> &[u8] {
    // SAFETY: ggml blocks are repr(C) plain data without padding.
    unsafe {
        std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks))
    }
}

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
    pub qs: Zeroed<Line32>,
    /// `[group][block]` high-bit lines.
    pub qh: Zeroed<Line32>,
    /// `[group][block][8]` row scales.
    pub d: Zeroed<[f16; GROUP]>,
}

impl std::fmt::Debug for Q5_0x8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Q5_0x8 {{ rows: {}, k: {} }}", self.rows, self.k)
    }
}

impl Q5_0x8 {
    /// Repacks `rows` rows of `w` (row-major, `k / 32` blocks per row), in parallel chunks of
    /// groups; `done` gets each chunk's source blocks once they are no longer needed.
    pub fn repack(w: &[BlockQ5_0], rows: usize, k: usize, done: &Release) -> Q5_0x8 {
        let nb = k / 32;
        assert_eq!(w.len(), rows * nb, "block count != rows x k/32");
        let groups = rows.div_ceil(GROUP);
        let mut qs = Zeroed::<Line32>::new(groups * nb * 4);
        let mut qh = Zeroed::<Line32>::new(groups * nb);
        let mut d = Zeroed::<[f16; GROUP]>::new(groups * nb);
        let cg = chunk_groups(nb * GROUP * std::mem::size_of::<BlockQ5_0>());
        qs.par_chunks_mut(cg * nb * 4)
            .zip(qh.par_chunks_mut(cg * nb))
            .zip(d.par_chunks_mut(cg * nb))
            .enumerate()
            .for_each(|(c, ((qs, qh), d))| {
                let (r0, r1) = (c * cg * GROUP, ((c + 1) * cg * GROUP).min(rows));
                for row in r0..r1 {
                    let (gl, r) = ((row - r0) / GROUP, row % GROUP);
                    for b in 0..nb {
                        let (x, gb) = (&w[row * nb + b], gl * nb + b);
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
                done(as_bytes(&w[r0 * nb..r1 * nb]));
            });
        Q5_0x8 {
            rows,
            k,
            nb,
            qs,
            qh,
            d,
        }
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

/// A Q8_0 matrix of `rows` × `k` repacked into 8-row groups.
pub struct Q8_0x8 {
    pub rows: usize,
    pub k: usize,
    pub nb: usize,
    /// `[group][block][8]` register lines (signed quants).
    pub qs: Zeroed<Line32>,
    /// `[group][block][8]` row scales.
    pub d: Zeroed<[f16; GROUP]>,
}

impl Q8_0x8 {
    /// Repacks `rows` rows of `w`; `done` as for [`Q5_0x8::repack`].
    pub fn repack(w: &[BlockQ8_0], rows: usize, k: usize, done: &Release) -> Q8_0x8 {
        let nb = k / 32;
        assert_eq!(w.len(), rows * nb, "block count != rows x k/32");
        let groups = rows.div_ceil(GROUP);
        let mut qs = Zeroed::<Line32>::new(groups * nb * 8);
        let mut d = Zeroed::<[f16; GROUP]>::new(groups * nb);
        let cg = chunk_groups(nb * GROUP * std::mem::size_of::<BlockQ8_0>());
        qs.par_chunks_mut(cg * nb * 8)
            .zip(d.par_chunks_mut(cg * nb))
            .enumerate()
            .for_each(|(c, (qs, d))| {
                let (r0, r1) = (c * cg * GROUP, ((c + 1) * cg * GROUP).min(rows));
                for row in r0..r1 {
                    let (gl, r) = ((row - r0) / GROUP, row % GROUP);
                    for b in 0..nb {
                        let (x, gb) = (&w[row * nb + b], gl * nb + b);
                        d[gb][r] = x.d;
                        for reg in 0..8 {
                            for j in 0..4 {
                                qs[gb * 8 + reg].0[4 * r + j] = x.qs[4 * reg + j] as u8;
                            }
                        }
                    }
                }
                done(as_bytes(&w[r0 * nb..r1 * nb]));
            });
        Q8_0x8 { rows, k, nb, qs, d }
    }

    /// Quant `i` (0..32) of row `r` of group `g`, block `b`.
    #[inline]
    pub fn quant(&self, g: usize, b: usize, r: usize, i: usize) -> i8 {
        self.qs[(g * self.nb + b) * 8 + i / 4].0[4 * r + i % 4] as i8
    }
}

/// A weight matrix in one of the interleaved layouts.
pub enum PackedMatrix {
    Q5_0(Q5_0x8),
    Q8_0(Q8_0x8),
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x8 {{ rows: {}, k: {} }}",
            self.ty(),
            self.rows(),
            self.k()
        )
    }
}

impl PackedMatrix {
    /// Repacks `rows` × `k` weights of type `ty` from their file bytes; `None` for a type
    /// without an interleaved layout or bytes that do not fit.
    /// `done` is told which source bytes are finished with, chunk by chunk.
    pub fn repack(
        ty: GgmlType,
        data: &[u8],
        rows: usize,
        k: usize,
        done: &Release,
    ) -> Option<PackedMatrix> {
        if !k.is_multiple_of(32) {
            return None;
        }
        let fits = |n: usize| n == rows * (k / 32);
        match ty {
            GgmlType::Q5_0 => {
                let w: &[BlockQ5_0] = cast_blocks(data).filter(|w| fits(w.len()))?;
                Some(PackedMatrix::Q5_0(Q5_0x8::repack(w, rows, k, done)))
            }
            GgmlType::Q8_0 => {
                let w: &[BlockQ8_0] = cast_blocks(data).filter(|w| fits(w.len()))?;
                Some(PackedMatrix::Q8_0(Q8_0x8::repack(w, rows, k, done)))
            }
            _ => None,
        }
    }

    pub fn ty(&self) -> GgmlType {
        match self {
            PackedMatrix::Q5_0(_) => GgmlType::Q5_0,
            PackedMatrix::Q8_0(_) => GgmlType::Q8_0,
        }
    }

    pub fn rows(&self) -> usize {
        match self {
            PackedMatrix::Q5_0(w) => w.rows,
            PackedMatrix::Q8_0(w) => w.rows,
        }
    }

    pub fn k(&self) -> usize {
        match self {
            PackedMatrix::Q5_0(w) => w.k,
            PackedMatrix::Q8_0(w) => w.k,
        }
    }

    /// Blocks per row.
    pub fn nb(&self) -> usize {
        self.k() / 32
    }

    pub fn groups(&self) -> usize {
        self.rows().div_ceil(GROUP)
    }

    /// Bytes of one group's weights.
    pub fn group_bytes(&self) -> usize {
        let per_block = match self {
            PackedMatrix::Q5_0(_) => 176,
            PackedMatrix::Q8_0(_) => 272,
        };
        self.nb() * per_block
    }

    /// Row `r` as f32 (embedding lookups of a tied, repacked token embedding).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let (g, rr) = (r / GROUP, r % GROUP);
        for (b, o) in out.chunks_exact_mut(32).enumerate().take(self.nb()) {
            let gb = g * self.nb() + b;
            for (i, o) in o.iter_mut().enumerate() {
                *o = match self {
                    PackedMatrix::Q5_0(w) => {
                        (w.quant(g, b, rr, i) as i32 - 16) as f32 * w.d[gb][rr].to_f32()
                    }
                    PackedMatrix::Q8_0(w) => w.quant(g, b, rr, i) as f32 * w.d[gb][rr].to_f32(),
                };
            }
        }
    }

    /// Scalar twin of the SIMD kernels: `out[t][r]` = row `r` of group `g` · token `t`, with
    /// exactly the integer sums of the in-place scalar dot kernels per block.
    pub fn scalar_group(
        &self,
        g: usize,
        a: &[&[BlockQ8_0]],
        sums: &[&[i32]],
        out: &mut [[f32; GROUP]],
    ) {
        match self {
            PackedMatrix::Q5_0(w) => q5_0x8_group(w, g, a, sums, out),
            PackedMatrix::Q8_0(w) => {
                for (y, o) in a.iter().zip(out.iter_mut()) {
                    let mut acc = [0f32; GROUP];
                    for b in 0..w.nb {
                        let (yb, gb) = (&y[b], g * w.nb + b);
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let sumi: i32 = (0..32)
                                .map(|i| w.quant(g, b, r, i) as i32 * yb.qs[i] as i32)
                                .sum();
                            *acc += sumi as f32 * (w.d[gb][r].to_f32() * yb.d.to_f32());
                        }
                    }
                    *o = acc;
                }
            }
        }
    }
}
