//! Weights repacked at load into groups of 8 interleaved rows, so one activation load, one
//! scale conversion and one f32 multiply-add serve 8 rows. Each layout lives with its weight
//! type (`types/<type>/x8/`) and implements [`Layout`]; this module has what they share: the
//! group storage, the kernel tables ([`PackedKernels`]) and the plan's face of a repacked
//! matrix ([`PackedWeights`]). The driver is `plan::packed`.
//!
//! Layout of one (row group, block column), 8 rows × 32 quants: "register" `k` (0..8) holds
//! quants `4k..4k+4` of each row, row `r` at bytes `4r..4r+4`. A kernel broadcasts the 4
//! matching activation bytes and multiplies all 8 rows with one instruction; the 32-bit lane
//! `r` of the result belongs to row `r` (the same grouping the 4-byte `vpdpbusd` / `sdot`
//! instructions use). Rows past the matrix's end (the last group) are zero and never written
//! out.

#[cfg(target_arch = "x86_64")]
pub mod amx;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
mod grouped;
mod kind;
pub(crate) mod kquant;
#[cfg(target_arch = "x86_64")]
pub mod prefetch;
pub(crate) mod q32;
mod storage;

pub(crate) use grouped::GroupBlock;
pub use grouped::Grouped;
pub use kind::{LayoutKind, LayoutOf, PackedWeights};
pub use storage::{Zeroable, Zeroed};

use std::sync::Arc;

use half::f16;

use super::activations::{ActElem, QuantizedActivations};
use super::cpu::CpuPath;
use super::types::WeightType;
use crate::quant::GgmlType;

/// Rows per interleaved group.
pub(crate) const GROUP: usize = 8;

/// Rows of a pair of groups (the AVX-512 kernels' and AMX's unit).
pub(crate) const PAIR: usize = 2 * GROUP;

/// Tokens per AMX activation tile: the unit a `TilesFn` batch is cut into.
pub(crate) const TILE_TOKENS: usize = 16;

/// Most tokens per group or pair call: each call unpacks a weight block once for all its
/// tokens, so every batch size up to this gets a single call of its own width.
pub(crate) const MAX_WIDTH: usize = 8;

/// Told which source bytes a repack has finished with (the loader releases their pages, so the
/// original and the repacked copy are never both resident).
pub type Release<'a> = dyn Fn(&[u8]) + Sync + 'a;

/// The activation side data of a layout's activations.
pub(crate) type Side<L> = <<L as Layout>::Act as ActElem>::Side;

/// Up to [`MAX_WIDTH`] token rows of activations and their side data: what one group or
/// pair call reads (rows past the batch repeat its last token and are never written out).
pub struct TokenRows<'a, A, S> {
    pub a: [&'a [A]; MAX_WIDTH],
    pub sides: [&'a [S]; MAX_WIDTH],
}

#[cfg(target_arch = "x86_64")]
impl<'a, A, S> TokenRows<'a, A, S> {
    /// The first `T` token rows.
    #[inline]
    pub fn first<const T: usize>(&self) -> [&'a [A]; T] {
        std::array::from_fn(|j| self.a[j])
    }

    /// The first `T` token rows' side data.
    #[inline]
    pub fn first_sides<const T: usize>(&self) -> [&'a [S]; T] {
        std::array::from_fn(|j| self.sides[j])
    }
}

/// Rows of group `g` × the first `t` tokens into `out[..t]`.
pub(crate) type GroupFn<L> =
    unsafe fn(&L, usize, &TokenRows<<L as Layout>::Act, Side<L>>, &mut [[f32; GROUP]]);

/// Rows of groups `g` and `g + 1` × the first `t` tokens into `out[..t]`.
pub(crate) type PairFn<L> =
    unsafe fn(&L, usize, &TokenRows<<L as Layout>::Act, Side<L>>, &mut [[f32; PAIR]]);

/// Receives finished rows of a tile pass: pair `g`, the first token, then 16 rows per token.
pub type PutRows<'a> = dyn FnMut(usize, usize, &[[f32; PAIR]]) + 'a;

/// Rows of groups `g0..g1` (whole pairs) × tokens `0..n` (a multiple of 16) on AMX tiles.
pub(crate) type TilesFn<L> =
    unsafe fn(&L, usize, usize, (&[<L as Layout>::Act], &[Side<L>]), usize, &mut PutRows);

/// `[f::<1>, .., f::<8>]`: one entry per call width.
#[cfg(target_arch = "x86_64")]
macro_rules! widths {
    ($f:ident) => {
        [
            $f::<1>, $f::<2>, $f::<3>, $f::<4>, $f::<5>, $f::<6>, $f::<7>, $f::<8>,
        ]
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use widths;

/// The per-width table of layout `$L`'s kernel `$k` over `$rows` rows (one group or a pair),
/// generic over the token count `T`: `$k::<T>(w, g, the first T token rows[, their side
/// data])` into `out[..T]`.
#[cfg(target_arch = "x86_64")]
macro_rules! width_table {
    ($L:ty, $rows:expr, $k:ident $(, $sides:ident)?) => {{
        /// # Safety
        /// The kernel's.
        unsafe fn at<const T: usize>(
            w: &$L,
            g: usize,
            r: &$crate::kernels::packed::TokenRows<
                <$L as $crate::kernels::packed::Layout>::Act,
                $crate::kernels::packed::Side<$L>,
            >,
            out: &mut [[f32; $rows]],
        ) {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                out[..T].copy_from_slice(&$k::<T>(w, g, r.first() $(, r.$sides())?));
            }
        }
        $crate::kernels::packed::widths!(at)
    }};
}
#[cfg(target_arch = "x86_64")]
pub(crate) use width_table;

/// A layout's kernels on one path. Every entry is `unsafe`: SIMD ones need their CPU features,
/// and a table is only taken for a backend's path.
pub(crate) struct PackedKernels<L: Layout> {
    /// One group × `t` tokens at index `t - 1`; `None`: the layout's scalar twin.
    pub group: Option<[GroupFn<L>; MAX_WIDTH]>,
    pub group_isa: &'static str,
    /// Two groups × `t` tokens at index `t - 1`, used from `pair_min` tokens on.
    pub pair: Option<[PairFn<L>; MAX_WIDTH]>,
    pub pair_isa: &'static str,
    pub pair_min: usize,
    /// AMX tiles for whole pairs × whole 16-token tiles of a batch.
    pub tiles: Option<TilesFn<L>>,
    /// Widest group or pair call, in tokens (at most [`MAX_WIDTH`]).
    pub width: usize,
}

impl<L: Layout> PackedKernels<L> {
    /// The scalar twin only, calls of up to `width` tokens.
    pub const fn scalar(width: usize) -> PackedKernels<L> {
        PackedKernels {
            group: None,
            group_isa: "scalar",
            pair: None,
            pair_isa: "",
            pair_min: usize::MAX,
            tiles: None,
            width,
        }
    }
}

/// An 8-row layout of one weight type.
pub(crate) trait Layout: Sized + Send + Sync + 'static {
    const TYPE: GgmlType;
    /// The weight type it repacks.
    type File: WeightType<Act = Self::Act>;
    /// The activation blocks its kernels read.
    type Act: ActElem;

    /// `(rows, k, blocks per row)`.
    fn shape(&self) -> (usize, usize, usize);

    /// Bytes of one group's weights (what a row block of groups is sized by).
    fn group_bytes(&self) -> usize;

    /// Repacks `rows` × `k` weights from their file bytes (`None` if the bytes do not fit);
    /// `done` is told which source bytes are finished with, chunk by chunk.
    fn repack(data: &[u8], rows: usize, k: usize, done: &Release<'_>) -> Option<Self>;

    /// The matrix over arrays already laid out in `map` (a repack cache), array `i` at byte
    /// `offsets[i]`; `None` unless they fit the mapping and their alignment.
    fn from_mapped(
        rows: usize,
        k: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Self>;

    /// The arrays behind the matrix as bytes, in the order [`Layout::from_mapped`] takes them.
    fn arrays(&self) -> Vec<&[u8]>;

    /// Row `r` as f32 (embedding lookups of a tied, repacked token embedding).
    fn dequantize_row(&self, r: usize, out: &mut [f32]);

    /// The scalar twin of the kernels: `out[t][r]` = row `r` of group `g` · token `t`, with
    /// exactly the integer sums of the type's scalar dot per block.
    fn scalar_group(
        &self,
        g: usize,
        a: &[&[Self::Act]],
        sides: &[&[Side<Self>]],
        out: &mut [[f32; GROUP]],
    );

    /// The kernels on `path`.
    fn kernels(path: CpuPath) -> &'static PackedKernels<Self>;
}

/// `fn kernels(path)` of a generic layout `$L` of weight type `$S` (module `$m` under
/// `packed`: its `avx2::group` and `avx512::pair` kernels, generic over `$S`): the scalar twin,
/// the AVX2 group kernel, the AVX-512 pair kernel from `$pair_min` tokens on, `$tiles` on AMX.
macro_rules! generic_kernels {
    (
        $S:ty, $L:ty, $m:ident, act: $A:ty, side: $Side:ty, width: $width:expr,
        pair_min: $pair_min:expr, tiles: $tiles:expr $(,)?
    ) => {
        fn kernels(
            path: $crate::kernels::CpuPath,
        ) -> &'static $crate::kernels::packed::PackedKernels<$L> {
            use $crate::kernels::packed::PackedKernels;
            const SCALAR: PackedKernels<$L> = PackedKernels::scalar($width);
            #[cfg(target_arch = "x86_64")]
            {
                use $crate::kernels::packed::{width_table, GROUP, PAIR};

                /// # Safety
                /// The generic AVX2 kernel's.
                #[target_feature(enable = "avx2,fma,f16c")]
                unsafe fn avx2_group<const T: usize>(
                    w: &$L,
                    g: usize,
                    a: [&[$A]; T],
                    sides: [&[$Side]; T],
                ) -> [[f32; GROUP]; T] {
                    // SAFETY: this function's `# Safety` contract, which the caller upholds.
                    unsafe { $crate::kernels::packed::$m::avx2::group::<$S, T>(w, g, a, sides) }
                }

                /// # Safety
                /// The generic AVX-512 kernel's.
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
                unsafe fn avx512_pair<const T: usize>(
                    w: &$L,
                    g: usize,
                    a: [&[$A]; T],
                    sides: [&[$Side]; T],
                ) -> [[f32; PAIR]; T] {
                    // SAFETY: this function's `# Safety` contract, which the caller upholds.
                    unsafe { $crate::kernels::packed::$m::avx512::pair::<$S, T>(w, g, a, sides) }
                }

                const AVX2: PackedKernels<$L> = PackedKernels {
                    group: Some(width_table!($L, GROUP, avx2_group, first_sides)),
                    group_isa: "avx2",
                    ..SCALAR
                };
                const AVX512: PackedKernels<$L> = PackedKernels {
                    pair: Some(width_table!($L, PAIR, avx512_pair, first_sides)),
                    pair_isa: "avx512",
                    pair_min: $pair_min,
                    ..AVX2
                };
                const AMX: PackedKernels<$L> = PackedKernels {
                    tiles: $tiles,
                    ..AVX512
                };
                match path {
                    $crate::kernels::CpuPath::Avx2 => return &AVX2,
                    $crate::kernels::CpuPath::Avx512 => return &AVX512,
                    $crate::kernels::CpuPath::Amx => return &AMX,
                    _ => {}
                }
            }
            let _ = path;
            &SCALAR
        }
    };
}
pub(crate) use generic_kernels;

/// A layout's kernel table for `$path`: its `avx2`, `avx512` and `amx` modules' `KERNELS` on
/// x86, `$scalar` elsewhere.
macro_rules! kernels_by_path {
    ($path:expr, $scalar:expr) => {
        match $path {
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::CpuPath::Avx2 => &avx2::KERNELS,
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::CpuPath::Avx512 => &avx512::KERNELS,
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::CpuPath::Amx => &amx::KERNELS,
            _ => &$scalar,
        }
    };
}
pub(crate) use kernels_by_path;

/// Groups per parallel repack chunk: about 256 KiB of source, so a tensor of a few hundred KiB
/// still spreads over the threads (the loader repacks one tensor at a time), and releasing
/// whole pages inside each chunk leaves little behind.
pub(crate) fn chunk_groups(group_bytes: usize) -> usize {
    ((256 << 10) / group_bytes.max(1)).max(1)
}

/// Views blocks as their bytes (what a chunk's release is told).
pub(crate) fn as_bytes<B>(blocks: &[B]) -> &[u8] {
    // SAFETY: ggml blocks are repr(C) plain data without padding.
    unsafe {
        std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks))
    }
}

/// 32 bytes on a 32-byte boundary, so the kernels' vector loads never straddle a cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
pub struct Line32(pub [u8; 32]);

// SAFETY: bytes.
unsafe impl Zeroable for Line32 {}
// SAFETY: f16 bit patterns.
unsafe impl Zeroable for [f16; GROUP] {}

/// A layout's activation blocks and their side data (borrowed from the activations, or
/// computed).
pub(crate) type TokenData<'a, L> = (&'a [<L as Layout>::Act], std::borrow::Cow<'a, [Side<L>]>);

/// The activations a layout's kernels read, and their side data: computed here when the
/// quantizer skipped them (a caller repacking by hand).
pub(crate) fn token_data<L: Layout>(act: &QuantizedActivations) -> Option<TokenData<'_, L>> {
    let a = L::Act::of(act)?;
    let sides = L::Act::sides(act);
    let sides = if sides.len() == a.len() {
        std::borrow::Cow::Borrowed(sides)
    } else {
        std::borrow::Cow::Owned(L::Act::compute_sides(a))
    };
    Some((a, sides))
}

/// Test helper: `GROUP` random file blocks (`make` draws their bytes) put into one zeroed
/// group block; every quant must read back (`quant(group, row, p)`) as the file has it
/// (`file_quant(block, p)`).
#[cfg(test)]
pub(crate) fn check_put<S: Zeroable, B>(
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
        for p in 0..crate::quant::QK_K {
            assert_eq!(quant(&g, r, p), file_quant(x, p), "row {r} quant {p}");
        }
    }
}

/// Row `r` of a matrix of `nb` blocks per row and `k` weights, block by block:
/// `block(g, b, row in group, out)` writes block `b` of the row, which is in group `g`.
pub(crate) fn dequantize_by_blocks(
    (nb, k): (usize, usize),
    r: usize,
    out: &mut [f32],
    block: impl Fn(usize, usize, usize, &mut [f32]),
) {
    let (g, rr) = (r / GROUP, r % GROUP);
    let bl = k / nb.max(1);
    for (b, o) in out.chunks_exact_mut(bl).enumerate().take(nb) {
        block(g, b, rr, o);
    }
}
