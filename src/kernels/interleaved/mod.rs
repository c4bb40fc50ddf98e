//! Weights repacked at load into groups of 8 interleaved rows (Q5_0, Q8_0, Q4_K, Q6_K; one
//! file per type), so one activation load, one scale conversion and one f32 multiply-add serve
//! 8 rows.
//!
//! Layout of one (row group, block column), 8 rows × 32 quants: "register" `k` (0..8) holds
//! quants `4k..4k+4` of each row, row `r` at bytes `4r..4r+4`. A kernel broadcasts the 4
//! matching activation bytes and multiplies all 8 rows with one instruction; the 32-bit lane
//! `r` of the result belongs to row `r` (the same grouping the 4-byte `vpdpbusd` / `sdot`
//! instructions use). Quants are stored unsigned (Q5_0: 0..=31, the file's offset of 16 is
//! applied once per block as `-16 * sum(activations)`), so no sign trick is needed.
//!
//! Q8_0 stays signed; the K-quants keep one struct per (group, 256-quant block)
//! ([`Grouped`]).
//!
//! Rows past the matrix's end (the last group) are zero and never written out.

mod q4_k;
mod q5_0;
mod q6_k;
mod q8_0;
mod storage;

pub use q4_k::{k_block_sides, BlockQ4Kx8, Q8KSide};
pub use q5_0::{block_sides, Q5_0x8, Q8Side};
pub use q6_k::BlockQ6Kx8;
pub use q8_0::Q8_0x8;
pub use storage::{Zeroable, Zeroed};

use half::f16;
use rayon::prelude::*;

use crate::quant::blocks::{cast_blocks, BlockQ4K, BlockQ5_0, BlockQ6K, BlockQ8K, BlockQ8_0};
use crate::quant::types::QK_K;
use crate::quant::GgmlType;

/// Rows per interleaved group.
pub const GROUP: usize = 8;

/// Told which source bytes a repack has finished with (the loader releases their pages, so the
/// original and the repacked copy are never both resident).
pub type Release<'a> = dyn Fn(&[u8]) + Sync + 'a;

/// Groups per parallel repack chunk: about 256 KiB of source, so a tensor of a few hundred KiB
/// still spreads over the threads (the loader repacks one tensor at a time), and releasing
/// whole pages inside each chunk leaves little behind.
fn chunk_groups(group_bytes: usize) -> usize {
    ((256 << 10) / group_bytes.max(1)).max(1)
}

// SAFETY: bytes.
unsafe impl Zeroable for Line32 {}
// SAFETY: f16 bit patterns.
unsafe impl Zeroable for [f16; GROUP] {}

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

/// A matrix of `rows` × `k` stored as one `S` per (8-row group, block column): the layout of
/// the K-quants, whose blocks are big enough to keep a group's block in one struct.
pub struct Grouped<S> {
    pub rows: usize,
    pub k: usize,
    /// Blocks per row.
    pub nb: usize,
    /// `[group][block]`.
    pub blocks: Zeroed<S>,
}

impl<S: Zeroable + Send + Sync> Grouped<S> {
    /// Repacks `rows` rows of `w` (row-major, `nb` blocks per row) by `put(&mut dst, r, src)`
    /// into zeroed group blocks, in parallel chunks of about 1 MiB of source; `done` gets each
    /// chunk's source blocks once they are no longer needed.
    fn repack<B: Sync>(
        w: &[B],
        rows: usize,
        k: usize,
        nb: usize,
        done: &Release<'_>,
        put: impl Fn(&mut S, usize, &B) + Sync,
    ) -> Grouped<S> {
        assert_eq!(w.len(), rows * nb, "block count != rows x blocks per row");
        let mut blocks = Zeroed::<S>::new(rows.div_ceil(GROUP) * nb);
        let cg = chunk_groups(nb * GROUP * std::mem::size_of::<B>());
        blocks
            .par_chunks_mut(cg * nb)
            .enumerate()
            .for_each(|(c, dst)| {
                let (r0, r1) = (c * cg * GROUP, ((c + 1) * cg * GROUP).min(rows));
                for row in r0..r1 {
                    let (gl, r) = ((row - r0) / GROUP, row % GROUP);
                    for b in 0..nb {
                        put(&mut dst[gl * nb + b], r, &w[row * nb + b]);
                    }
                }
                done(as_bytes(&w[r0 * nb..r1 * nb]));
            });
        Grouped {
            rows,
            k,
            nb,
            blocks,
        }
    }

    /// Block column `b` of group `g`.
    #[inline]
    pub fn block(&self, g: usize, b: usize) -> &S {
        &self.blocks[g * self.nb + b]
    }

    /// The scalar twins' loop: `out[t][r]` = the sum over blocks of `dot(block, a[t]'s block,
    /// r)`, accumulated in block order as the in-place scalar kernels do.
    fn scalar_group<Y>(
        &self,
        g: usize,
        a: &[&[Y]],
        out: &mut [[f32; GROUP]],
        dot: impl Fn(&S, &Y, usize) -> f32,
    ) {
        for (y, o) in a.iter().zip(out.iter_mut()) {
            let mut acc = [0f32; GROUP];
            for (b, yb) in y.iter().enumerate().take(self.nb) {
                let x = self.block(g, b);
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc += dot(x, yb, r);
                }
            }
            *o = acc;
        }
    }
}

/// A weight matrix in one of the interleaved layouts.
pub enum PackedMatrix {
    Q5_0(Q5_0x8),
    Q8_0(Q8_0x8),
    Q4K(Grouped<BlockQ4Kx8>),
    Q6K(Grouped<BlockQ6Kx8>),
}

/// The activations one group call reads: a slice of blocks per token.
pub enum TokenRows<'a> {
    /// Q8_0 blocks and their [`block_sides`], for Q5_0 and Q8_0 weights.
    Q8_0(&'a [&'a [BlockQ8_0]], &'a [&'a [Q8Side]]),
    /// Q8_K blocks, for the K-quants.
    Q8K(&'a [&'a [BlockQ8K]]),
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
        done: &Release<'_>,
    ) -> Option<PackedMatrix> {
        if !Self::has_layout(ty, k) {
            return None;
        }
        let nb = k / Self::block_len(ty)?;
        let fits = |n: usize| n == rows * nb;
        Some(match ty {
            GgmlType::Q5_0 => {
                let w: &[BlockQ5_0] = cast_blocks(data).filter(|w| fits(w.len()))?;
                PackedMatrix::Q5_0(Q5_0x8::repack(w, rows, k, done))
            }
            GgmlType::Q8_0 => {
                let w: &[BlockQ8_0] = cast_blocks(data).filter(|w| fits(w.len()))?;
                PackedMatrix::Q8_0(Q8_0x8::repack(w, rows, k, done))
            }
            GgmlType::Q4_K => {
                let w: &[BlockQ4K] = cast_blocks(data).filter(|w| fits(w.len()))?;
                PackedMatrix::Q4K(Grouped::repack(w, rows, k, nb, done, BlockQ4Kx8::put))
            }
            GgmlType::Q6_K => {
                let w: &[BlockQ6K] = cast_blocks(data).filter(|w| fits(w.len()))?;
                PackedMatrix::Q6K(Grouped::repack(w, rows, k, nb, done, BlockQ6Kx8::put))
            }
            _ => return None,
        })
    }

    /// Quants per block of the types with an interleaved layout.
    fn block_len(ty: GgmlType) -> Option<usize> {
        match ty {
            GgmlType::Q5_0 | GgmlType::Q8_0 => Some(32),
            GgmlType::Q4_K | GgmlType::Q6_K => Some(QK_K),
            _ => None,
        }
    }

    /// Whether rows of `k` weights of type `ty` have an interleaved layout (the type has
    /// one and `k` is whole blocks).
    pub fn has_layout(ty: GgmlType, k: usize) -> bool {
        Self::block_len(ty).is_some_and(|bl| k > 0 && k.is_multiple_of(bl))
    }

    pub fn ty(&self) -> GgmlType {
        match self {
            PackedMatrix::Q5_0(_) => GgmlType::Q5_0,
            PackedMatrix::Q8_0(_) => GgmlType::Q8_0,
            PackedMatrix::Q4K(_) => GgmlType::Q4_K,
            PackedMatrix::Q6K(_) => GgmlType::Q6_K,
        }
    }

    pub fn rows(&self) -> usize {
        match self {
            PackedMatrix::Q5_0(w) => w.rows,
            PackedMatrix::Q8_0(w) => w.rows,
            PackedMatrix::Q4K(w) => w.rows,
            PackedMatrix::Q6K(w) => w.rows,
        }
    }

    pub fn k(&self) -> usize {
        match self {
            PackedMatrix::Q5_0(w) => w.k,
            PackedMatrix::Q8_0(w) => w.k,
            PackedMatrix::Q4K(w) => w.k,
            PackedMatrix::Q6K(w) => w.k,
        }
    }

    /// Blocks per row.
    pub fn nb(&self) -> usize {
        match self {
            PackedMatrix::Q5_0(w) => w.nb,
            PackedMatrix::Q8_0(w) => w.nb,
            PackedMatrix::Q4K(w) => w.nb,
            PackedMatrix::Q6K(w) => w.nb,
        }
    }

    pub fn groups(&self) -> usize {
        self.rows().div_ceil(GROUP)
    }

    /// Bytes of one group's weights.
    pub fn group_bytes(&self) -> usize {
        let per_block = match self {
            PackedMatrix::Q5_0(_) => 176,
            PackedMatrix::Q8_0(_) => 272,
            PackedMatrix::Q4K(_) => std::mem::size_of::<BlockQ4Kx8>(),
            PackedMatrix::Q6K(_) => std::mem::size_of::<BlockQ6Kx8>(),
        };
        self.nb() * per_block
    }

    /// Row `r` as f32 (embedding lookups of a tied, repacked token embedding).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let (g, rr) = (r / GROUP, r % GROUP);
        let bl = self.k() / self.nb().max(1);
        for (b, o) in out.chunks_exact_mut(bl).enumerate().take(self.nb()) {
            match self {
                PackedMatrix::Q5_0(w) => w.dequantize(g, b, rr, o),
                PackedMatrix::Q8_0(w) => w.dequantize(g, b, rr, o),
                PackedMatrix::Q4K(w) => w.block(g, b).dequantize(rr, o),
                PackedMatrix::Q6K(w) => w.block(g, b).dequantize(rr, o),
            }
        }
    }

    /// Scalar twin of the SIMD kernels: `out[t][r]` = row `r` of group `g` · token `t`, with
    /// exactly the integer sums of the in-place scalar dot kernels per block.
    ///
    /// # Panics
    /// If the activations are not in the format the weight type reads.
    pub fn scalar_group(&self, g: usize, a: TokenRows, out: &mut [[f32; GROUP]]) {
        match (self, a) {
            (PackedMatrix::Q5_0(w), TokenRows::Q8_0(a, sides)) => {
                q5_0::q5_0x8_group(w, g, a, sides, out)
            }
            (PackedMatrix::Q8_0(w), TokenRows::Q8_0(a, _)) => q8_0::q8_0x8_group(w, g, a, out),
            (PackedMatrix::Q4K(w), TokenRows::Q8K(a)) => w.scalar_group(g, a, out, q4_k::dot),
            (PackedMatrix::Q6K(w), TokenRows::Q8K(a)) => w.scalar_group(g, a, out, q6_k::dot),
            _ => panic!("{} x8 weights: wrong activation format", self.ty()),
        }
    }
}

/// Test helper: `GROUP` random file blocks (`make` draws their bytes) put into one zeroed
/// group block; every quant must read back (`quant(group, row, p)`) as the file has it
/// (`file_quant(block, p)`).
#[cfg(test)]
fn check_put<S: Zeroable, B>(
    seed: u32,
    make: impl Fn(&mut dyn FnMut() -> u8) -> B,
    put: impl Fn(&mut S, usize, &B),
    quant: impl Fn(&S, usize, usize) -> u8,
    file_quant: impl Fn(&B, usize) -> u8,
) {
    let mut seed = seed;
    let mut byte = || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 24) as u8
    };
    let rows: Vec<B> = (0..GROUP).map(|_| make(&mut byte)).collect();
    // SAFETY: `Zeroable` promises all-zero is a valid `S`.
    let mut g: S = unsafe { std::mem::zeroed() };
    for (r, x) in rows.iter().enumerate() {
        put(&mut g, r, x);
    }
    for (r, x) in rows.iter().enumerate() {
        for p in 0..QK_K {
            assert_eq!(quant(&g, r, p), file_quant(x, p), "row {r} quant {p}");
        }
    }
}

/// Bytes ahead in each weight stream at which the vector kernels prefetch. The hardware
/// prefetcher alone left a 1-token Q8_0 matrix-vector product (262144 × 640, one thread) at
/// 6.2 GB/s where a plain read loop reaches 11-12; 1, 2, 4, 8 and 16 KiB ahead gave 9.0, 9.5,
/// 11.0, 10.3 and 9.9 GB/s.
#[cfg(target_arch = "x86_64")]
const PREFETCH_BYTES: usize = 4096;

/// Bytes ahead at which the K-quant layouts also prefetch into L2 (see
/// [`Grouped::prefetch_block`]).
#[cfg(target_arch = "x86_64")]
const FAR_PREFETCH_BYTES: usize = 3 * PREFETCH_BYTES;

/// Prefetches elements `i..i + n` of `s`, moved [`PREFETCH_BYTES`] ahead (rounded down to
/// whole elements), into L1.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn prefetch_ahead<T>(s: &[T], i: usize, n: usize) {
    let size = std::mem::size_of::<T>();
    let at = s.as_ptr().wrapping_add(i + PREFETCH_BYTES / size) as *const i8;
    for line in (0..n * size).step_by(64) {
        // SAFETY: a prefetch is a hint that faults on no address; wrapping arithmetic keeps
        // the pointer computation defined past the end of `s`.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(line))
        };
    }
}

#[cfg(target_arch = "x86_64")]
impl Q5_0x8 {
    /// [`prefetch_ahead`] of block `gb`'s quants, high bits and scales.
    #[inline(always)]
    pub(crate) fn prefetch_block(&self, gb: usize) {
        prefetch_ahead(&self.qs[..], gb * 4, 4);
        prefetch_ahead(&self.qh[..], gb, 1);
        prefetch_ahead(&self.d[..], gb, 1);
    }
}

#[cfg(target_arch = "x86_64")]
impl Q8_0x8 {
    /// [`prefetch_ahead`] of block `gb`'s quants and scales.
    #[inline(always)]
    pub(crate) fn prefetch_block(&self, gb: usize) {
        prefetch_ahead(&self.qs[..], gb * 8, 8);
        prefetch_ahead(&self.d[..], gb, 1);
    }
}

/// The line at `at` into L1 from [`PREFETCH_BYTES`] ahead and into L2 from
/// [`FAR_PREFETCH_BYTES`] ahead.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_line_near_far(at: *const i8) {
    // SAFETY: a prefetch is a hint that faults on no address; wrapping arithmetic keeps the
    // pointer computation defined past the end of the blocks.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
        _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(PREFETCH_BYTES));
        _mm_prefetch::<_MM_HINT_T1>(at.wrapping_add(FAR_PREFETCH_BYTES));
    }
}

#[cfg(target_arch = "x86_64")]
impl<S: Zeroable> Grouped<S> {
    /// Every line of block `b` of group `g`, near and far ([`prefetch_line_near_far`]). The
    /// far prefetch, measured on 500 MB of 8960 x 1536 matrices, each pass against 4 KiB into
    /// L1 alone in the same round (median of 10): Q4_K 1 token 0.83x the time on one thread,
    /// 0.93x on two, 5 tokens 0.83x and 0.85-0.88x; Q6_K 0.96-0.99x. The Q5_0 and Q8_0
    /// layouts lost 0-11% with it, so they keep the L1 prefetch alone.
    #[inline(always)]
    pub(crate) fn prefetch_block(&self, g: usize, b: usize) {
        let block = self.blocks.as_ptr().wrapping_add(g * self.nb + b) as *const i8;
        for line in 0..std::mem::size_of::<S>().div_ceil(64) {
            prefetch_line_near_far(block.wrapping_add(64 * line));
        }
    }
}

/// Part `part` of [`PREFETCH_PARTS`] of what [`Grouped::prefetch_block`] prefetches for
/// `block`, for kernels that spread it over a block's sub-blocks: the lines ahead of the
/// block's `part`-th slice of `⌈size / PARTS⌉` bytes. A slice of `w` bytes gets `⌈w / 64⌉`
/// prefetches, 64 bytes apart from its start: they reach every line the slice touches
/// but, perhaps, its last, and that one holds the next slice's start. (A Q4_K block is 19
/// lines, so 24 prefetches; Q6_K 27 and 32.)
///
/// - **Spread, not all at once.** Issued all at once, a Q4_K block pair's 76 prefetches
///   (108 for Q6_K) arrive as a burst, likely more than the few line fill buffers take
///   without stalling the work behind them. Measured on 500 MB of 8960 x 1536 Q4_K matrices,
///   alternated in one process against the whole block at its start (median of 9 rounds,
///   four runs): 5 tokens 0.90-0.97x the time on two threads, 0.89-0.95x on one; 1 token
///   0.91-0.99x. Q6_K (1536 x 8960, separate processes alternated): 5 tokens 0.62-0.90x,
///   1 token 0.78-1.01x. The AVX2 one-group kernels lost 1-6% with it and prefetch whole
///   blocks.
/// - **The same count for every part.** Cutting the block's exact line list into parts
///   gave loops of 2 or 3 prefetches whose count changed from part to part, and a branch on
///   the storage kind for the block's address. A fixed count from the block's own address
///   unrolls into straight prefetches. Alternated in one process against the exact split
///   (median ratio over 11-15 rounds), 500 MB of matrices:
///   - Q4_K, 8960 x 1536, two threads: 1, 2, 3, 5 and 8 tokens 0.93x, 0.96x, 0.92x, 0.91x
///     and 0.93x the time; one thread, 1 and 5 tokens 0.96x and 0.86x;
///   - Q6_K, 1536 x 8960, two threads: 1 token 0.95-0.96x, 5 tokens 0.90-0.94x; one thread
///     0.95x and 0.87x.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn prefetch_part<S>(block: &S, part: usize) {
    let width = std::mem::size_of::<S>().div_ceil(PREFETCH_PARTS);
    let at = (block as *const S as *const i8).wrapping_add(part * width);
    for line in 0..width.div_ceil(64) {
        prefetch_line_near_far(at.wrapping_add(64 * line));
    }
}

/// Parts a K-quant block's prefetches are split into: one per sub-block.
#[cfg(target_arch = "x86_64")]
pub(crate) const PREFETCH_PARTS: usize = 8;
