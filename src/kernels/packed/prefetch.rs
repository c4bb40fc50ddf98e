//! Software prefetch for the repacked kernels' weight streams: the hardware prefetcher alone
//! left a one-token matrix-vector product at about half of a plain read loop's bandwidth.
//! (The measurements behind each distance are in the commit messages that set them.)

use super::{Grouped, Zeroable};

/// Bytes ahead in each weight stream at which the vector kernels prefetch into L1 (best of
/// 1-16 KiB measured on a 1-token Q8_0 product).
const PREFETCH_BYTES: usize = 4096;

/// Bytes ahead at which the K-quant layouts also prefetch into L2 (it paid for Q4_K and Q6_K
/// and cost the 32-quant layouts, which keep the L1 prefetch alone).
const FAR_PREFETCH_BYTES: usize = 3 * PREFETCH_BYTES;

/// Prefetches elements `i..i + n` of `s`, moved [`PREFETCH_BYTES`] ahead (rounded down to
/// whole elements), into L1.
#[inline(always)]
pub fn prefetch_ahead<T>(s: &[T], i: usize, n: usize) {
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

/// The line at `at` into L1 from [`PREFETCH_BYTES`] ahead and into L2 from
/// [`FAR_PREFETCH_BYTES`] ahead.
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

impl<S: Zeroable> Grouped<S> {
    /// Every line of block `b` of group `g`, near and far (the AVX2 one-group kernels: they
    /// lost 1-6% with the prefetches spread over sub-blocks).
    #[inline(always)]
    pub fn prefetch_block(&self, g: usize, b: usize) {
        let block = self.blocks.as_ptr().wrapping_add(g * self.nb + b) as *const i8;
        for line in 0..std::mem::size_of::<S>().div_ceil(64) {
            prefetch_line_near_far(block.wrapping_add(64 * line));
        }
    }
}

/// Parts a K-quant block's prefetches are split into: one per sub-block.
pub(crate) const PREFETCH_PARTS: usize = 8;

/// Part `part` of [`PREFETCH_PARTS`] of what [`Grouped::prefetch_block`] prefetches for
/// `block`, for kernels that spread it over a block's sub-blocks: the lines ahead of the
/// block's `part`-th slice of `⌈size / PARTS⌉` bytes. A slice of `w` bytes gets `⌈w / 64⌉`
/// prefetches, 64 bytes apart from its start: they reach every line the slice touches but,
/// perhaps, its last, and that one holds the next slice's start.
///
/// Spread, because a block pair's 76-108 prefetches issued at once likely queue behind the
/// few line fill buffers and stall the work behind them; the same count for every part, from
/// the block's own address, because that compiles to straight code (an exact split of the
/// line list gave short loops of varying length and a branch per call).
#[inline(always)]
pub fn prefetch_part<S>(block: &S, part: usize) {
    let width = std::mem::size_of::<S>().div_ceil(PREFETCH_PARTS);
    let at = (block as *const S as *const i8).wrapping_add(part * width);
    for line in 0..width.div_ceil(64) {
        prefetch_line_near_far(at.wrapping_add(64 * line));
    }
}
