//! AMX-INT8 tile kernels for prompt batches over the Q5_0 and Q8_0 8-row layouts: 16 rows
//! (two groups) × 16 or 32 tokens per 32-quant block.
//!
//! Their weights are signed bytes already (Q5_0's `q - 16`, Q8_0's `q`), so a 16-row panel is
//! unpacked once to 8 × 64-byte tiles per block and every token tile goes through one
//! `tdpbssd` of depth 32 per block: the block sums are the integers the vector kernels form
//! (they add and take off an offset that cancels), and each block's f32 step, `acc += (dw ·
//! dy) · sum`, is theirs, so the results agree bit for bit. The f16 scale per 32 quants means a
//! finishing step per block, which takes most of the time here.
//!
//! # Safety
//! Every `pub unsafe fn` here requires the AMX path and `g0..g1` to be whole pairs
//! of groups.

use std::arch::asm;
use std::arch::x86_64::*;

use super::{Line64, Tiles, PANEL_BUDGET, SCRATCH, TILE, TILE_TOKENS};
use crate::kernels::activations::Q8Side;
use crate::kernels::packed::{PutRows, PAIR};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8_0;

/// Unpacked bytes per (pair, block): 8 rows of 4 quants × 16 weight rows.
pub(crate) const PANEL_BLOCK: usize = 8 * 64;

/// A 32-quant block layout the tile kernel can unpack.
pub trait Blocks32 {
    /// Blocks per row.
    fn nb(&self) -> usize;
    /// Writes block `b` of groups `g`, `g + 1` as one tile of signed weights: row `k` holds
    /// quants `4k..4k + 4` of each of the 16 rows.
    ///
    /// # Safety
    /// the AMX path; the groups exist; `out` has [`PANEL_BLOCK`] bytes.
    unsafe fn unpack(&self, g: usize, b: usize, out: *mut u8);
    /// Row scales of block `b` of groups `g`, `g + 1`.
    ///
    /// # Safety
    /// As for `unpack`.
    unsafe fn scales(&self, g: usize, b: usize) -> __m512;
}

/// One (pair, block) step: `TT` token tiles (first token's block `a`, `stride` bytes between
/// tokens) × the pair's weight tile into `sums` (`[tile][token][row]` i32).
///
/// # Safety
/// Tiles configured for 32-byte activation rows; the rows and `w` ([`PANEL_BLOCK`] bytes)
/// readable; `sums` holds `TT` tiles.
#[inline(always)]
unsafe fn block_step<const TT: usize>(a: *const u8, stride: usize, w: *const u8, sums: *mut u8) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        if TT == 2 {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tileloadd tmm4, [{a0} + {sa} * 1]",
                "tileloadd tmm5, [{a1} + {sa} * 1]",
                "tileloadd tmm6, [{w} + {sw} * 1]",
                "tdpbssd tmm0, tmm4, tmm6",
                "tdpbssd tmm1, tmm5, tmm6",
                "tilestored [{s0} + {sw} * 1], tmm0",
                "tilestored [{s1} + {sw} * 1], tmm1",
                a0 = in(reg) a,
                a1 = in(reg) a.add(TILE_TOKENS * stride),
                sa = in(reg) stride,
                w = in(reg) w,
                sw = in(reg) 64usize,
                s0 = in(reg) sums,
                s1 = in(reg) sums.add(TILE),
                options(nostack),
            );
        } else {
            asm!(
                "tilezero tmm0",
                "tileloadd tmm4, [{a0} + {sa} * 1]",
                "tileloadd tmm6, [{w} + {sw} * 1]",
                "tdpbssd tmm0, tmm4, tmm6",
                "tilestored [{s0} + {sw} * 1], tmm0",
                a0 = in(reg) a,
                sa = in(reg) stride,
                w = in(reg) w,
                sw = in(reg) 64usize,
                s0 = in(reg) sums,
                options(nostack),
            );
        }
    }
}

tf! {
/// `acc[i] += (dw · dy_i) · sum_i` for the step's tokens, the vector kernels' f32 step.
#[inline]
unsafe fn finish_step(dw: __m512, dys: &[f32], sums: *const u8, acc: &mut [[f32; PAIR]]) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        for (i, (acc, &dy)) in acc.iter_mut().zip(dys).enumerate() {
            let isum = _mm512_loadu_si512(sums.add(i * 64) as *const __m512i);
            let a = _mm512_loadu_ps(acc.as_ptr());
            let a = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dy)), _mm512_cvtepi32_ps(isum), a);
            _mm512_storeu_ps(acc.as_mut_ptr(), a);
        }
    }
}
}

/// Rows of groups `g0..g1` (whole pairs) × tokens `0..n` (a multiple of 16) of `w`, each
/// run of tokens' 16 rows of pair `g` passed to `put(g, first token, rows per token)`.
///
/// # Safety
/// [`super::amx::detected`]; `g0..g1` an even run of existing groups; `act` and `sides` hold
/// `n` token rows of `w.nb()` blocks.
pub unsafe fn matmul_pairs<W: Blocks32>(
    w: &W,
    g0: usize,
    g1: usize,
    (act, sides): (&[BlockQ8_0], &[Q8Side]),
    n: usize,
    put: &mut PutRows,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let nb = w.nb();
        let per_pair = nb * PANEL_BLOCK;
        let pairs_per_pass = (PANEL_BUDGET / per_pair).max(1);
        let stride = nb * std::mem::size_of::<BlockQ8_0>();
        let qs = std::mem::offset_of!(BlockQ8_0, qs);
        SCRATCH.with(|s| {
            let (panels, accs) = &mut *s.borrow_mut();
            let _tiles = Tiles::configure(32);
            let mut sums = [[Line64([0; 64]); 2 * TILE / 64]; 2];
            let mut dys = vec![0f32; nb * 2 * TILE_TOKENS];
            accs.resize(2 * TILE_TOKENS, [0.0; PAIR]);
            for p0 in (g0..g1).step_by(2 * pairs_per_pass) {
                let p1 = (p0 + 2 * pairs_per_pass).min(g1);
                let np = (p1 - p0) / 2;
                panels.resize(np * per_pair / 64, Line64([0; 64]));
                let base = panels.as_mut_ptr().cast::<u8>();
                let panel = |p: usize, b: usize| base.add(p * per_pair + b * PANEL_BLOCK);
                for p in 0..np {
                    for b in 0..nb {
                        w.unpack(p0 + 2 * p, b, panel(p, b));
                    }
                }
                let mut t0 = 0;
                while t0 < n {
                    let tt = if n - t0 >= 2 * TILE_TOKENS { 2 } else { 1 };
                    let tokens = tt * TILE_TOKENS;
                    for b in 0..nb {
                        for i in 0..tokens {
                            dys[b * tokens + i] = sides.get_unchecked((t0 + i) * nb + b).d;
                        }
                    }
                    for p in 0..np {
                        let g = p0 + 2 * p;
                        let acc = &mut accs[..tokens];
                        acc.iter_mut().for_each(|a| *a = [0.0; PAIR]);
                        // Each block's sums are finished during the next block's tile work.
                        for b in 0..=nb {
                            if b < nb {
                                let a = (act.as_ptr().add(t0 * nb + b) as *const u8).add(qs);
                                let buf = sums[b % 2].as_mut_ptr().cast::<u8>();
                                if tt == 2 {
                                    block_step::<2>(a, stride, panel(p, b), buf);
                                } else {
                                    block_step::<1>(a, stride, panel(p, b), buf);
                                }
                            }
                            if b > 0 {
                                let prev = sums[(b - 1) % 2].as_ptr().cast::<u8>();
                                let dy = &dys[(b - 1) * tokens..b * tokens];
                                finish_step(w.scales(g, b - 1), dy, prev, acc);
                            }
                        }
                        put(g, t0, acc);
                    }
                    t0 += tokens;
                }
            }
        });
    }
}
