//! The K-quant tile driver. Tiles hold bytes, while a K-quant's integer weight is `scale · q`
//! (Q4_K: up to 63 · 15; Q6_K: -128..127 · (q - 32)), which does not fit one. So each weight
//! panel is first unpacked to those products as i16 and split exactly into two byte tiles,
//! `v = 128 · hi + lo` (`lo` in 0..128, `hi` signed), and every activation tile goes through
//! both: the row sums are `128 · C_hi + C_lo`, the same integers the VNNI kernels sum per
//! block. The unpacking is paid once per 16 rows and reused by every token tile.
//!
//! Tile registers (all 16 rows × 64 bytes): `tmm0..4` the block sums (token tile 0 hi, lo;
//! token tile 1 hi, lo), `tmm4`/`tmm5` the activations of the two token tiles, `tmm6`/`tmm7`
//! the weights' hi and lo bytes.
//!
//! # Safety
//! Every `unsafe fn` here requires the AMX path and `g0..g1` to be whole pairs of groups.

use std::arch::asm;
use std::arch::x86_64::*;

use super::{Line64, Tiles, PANEL_BUDGET, SCRATCH, TILE, TILE_TOKENS};
use crate::kernels::activations::Q8KSide;
use crate::kernels::packed::{Grouped, PutRows, Zeroable, PAIR};
use crate::kernels::simd::avx512::tf;
use crate::quant::blocks::BlockQ8K;

/// Unpacked weight bytes per (pair, block): 4 quant slices × (hi, lo) tiles.
pub(crate) const PANEL_BLOCK: usize = 8 * TILE;

/// One token's side of a block step: its scale, its 32-quant sums as i16 pairs `(S_2i,
/// S_2i+1)` (the Q4_K mins' operand) and its 16-quant sums (the generic layouts' mins).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct TokenBlock {
    pub dy: f32,
    pub side: Q8KSide,
    pub bsums: [i16; 16],
}

impl TokenBlock {
    fn of(y: &BlockQ8K, side: &Q8KSide) -> TokenBlock {
        TokenBlock {
            dy: y.d,
            side: *side,
            bsums: y.bsums,
        }
    }
}

/// A K-quant layout the tile kernel can unpack and finish.
pub trait TileWeights {
    type Block: Zeroable;
    /// Per (pair, block) values of the finishing step.
    type Consts: Copy;
    /// Groups × block columns of blocks.
    fn grouped(&self) -> &Grouped<Self::Block>;
    /// Writes block column `b` of groups `x0`, `x1` as 64 registers' hi and lo byte tiles.
    ///
    /// # Safety
    /// the AMX path; `out` has [`PANEL_BLOCK`] bytes.
    unsafe fn unpack(x0: &Self::Block, x1: &Self::Block, out: *mut u8);
    /// # Safety
    /// the AMX path.
    unsafe fn consts(x0: &Self::Block, x1: &Self::Block) -> Self::Consts;
    /// Adds one block's row sums `isum` (16 rows, one token `y`) to `acc` in f32, in the
    /// vector kernels' order of operations.
    ///
    /// # Safety
    /// the AMX path.
    unsafe fn finish(c: &Self::Consts, y: &TokenBlock, isum: __m512i, acc: __m512) -> __m512;
}

tf! {
/// Per 16-bit lane the byte tiles of `v = scale · q`: even and odd bytes of `q` (signed) times
/// the i16 scale in `s16`, split as `v = 128 · hi + lo`.
#[inline]
pub unsafe fn split_products(q: __m512i, s16: __m512i) -> (__m512i, __m512i) {
    let even = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(q, 8), 8), s16);
    let odd = _mm512_mullo_epi16(_mm512_srai_epi16(q, 8), s16);
    let m7 = _mm512_set1_epi16(0x7f);
    let lo = _mm512_or_si512(
        _mm512_and_si512(even, m7),
        _mm512_slli_epi16(_mm512_and_si512(odd, m7), 8),
    );
    let hi = _mm512_or_si512(
        _mm512_and_si512(_mm512_srai_epi16(even, 7), _mm512_set1_epi16(0xff)),
        _mm512_slli_epi16(_mm512_srai_epi16(odd, 7), 8),
    );
    (hi, lo)
}

/// A per-row i32 scale (one per 32-bit lane) in both of the lane's 16-bit halves.
#[inline]
pub unsafe fn both_halves(s32: __m512i) -> __m512i {
    _mm512_or_si512(
        _mm512_and_si512(s32, _mm512_set1_epi32(0xffff)),
        _mm512_slli_epi32(s32, 16),
    )
}

/// Stores register `reg`'s hi and lo rows: slice `reg / 16`, tile row `reg % 16`.
#[inline]
pub unsafe fn store_register(out: *mut u8, reg: usize, (hi, lo): (__m512i, __m512i)) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let at = out.add((reg / 16) * 2 * TILE + (reg % 16) * 64);
        _mm512_storeu_si512(at as *mut __m512i, hi);
        _mm512_storeu_si512(at.add(TILE) as *mut __m512i, lo);
    }
}
}

/// Token rows `t0..t0 + 16 · TT` of one block column, as tile operands: the first token's
/// block and the stride between tokens.
#[derive(Clone, Copy)]
struct ActTiles {
    base: *const BlockQ8K,
    stride: usize,
}

/// One (pair, block) step: `TT` token tiles × the pair's 4 quant slices into `tmm0..2·TT`,
/// stored to `sums` (`[tile][hi, lo][token][row]` i32).
///
/// # Safety
/// Tiles configured; `act` rows and `panel` ([`PANEL_BLOCK`] bytes) readable; `sums` holds
/// `2 · TT` tiles.
#[inline(always)]
unsafe fn block_step<const TT: usize>(act: ActTiles, panel: *const u8, sums: *mut u8) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        asm!("tilezero tmm0", "tilezero tmm1", options(nostack, nomem));
        if TT == 2 {
            asm!("tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
        }
        let qs = std::mem::offset_of!(BlockQ8K, qs);
        for s in 0..4 {
            let a0 = (act.base as *const u8).add(qs + 64 * s);
            let w = panel.add(s * 2 * TILE);
            if TT == 2 {
                let a1 = a0.add(TILE_TOKENS * act.stride);
                asm!(
                    "tileloadd tmm4, [{a0} + {sa} * 1]",
                    "tileloadd tmm5, [{a1} + {sa} * 1]",
                    "tileloadd tmm6, [{w} + {sw} * 1]",
                    "tileloadd tmm7, [{wl} + {sw} * 1]",
                    "tdpbssd tmm0, tmm4, tmm6",
                    "tdpbssd tmm1, tmm4, tmm7",
                    "tdpbssd tmm2, tmm5, tmm6",
                    "tdpbssd tmm3, tmm5, tmm7",
                    a0 = in(reg) a0,
                    a1 = in(reg) a1,
                    sa = in(reg) act.stride,
                    w = in(reg) w,
                    wl = in(reg) w.add(TILE),
                    sw = in(reg) 64usize,
                    options(nostack, readonly),
                );
            } else {
                asm!(
                    "tileloadd tmm4, [{a0} + {sa} * 1]",
                    "tileloadd tmm6, [{w} + {sw} * 1]",
                    "tileloadd tmm7, [{wl} + {sw} * 1]",
                    "tdpbssd tmm0, tmm4, tmm6",
                    "tdpbssd tmm1, tmm4, tmm7",
                    a0 = in(reg) a0,
                    sa = in(reg) act.stride,
                    w = in(reg) w,
                    wl = in(reg) w.add(TILE),
                    sw = in(reg) 64usize,
                    options(nostack, readonly),
                );
            }
        }
        asm!(
            "tilestored [{s} + {st} * 1], tmm0",
            "tilestored [{s1} + {st} * 1], tmm1",
            s = in(reg) sums,
            s1 = in(reg) sums.add(TILE),
            st = in(reg) 64usize,
            options(nostack),
        );
        if TT == 2 {
            asm!(
                "tilestored [{s} + {st} * 1], tmm2",
                "tilestored [{s1} + {st} * 1], tmm3",
                s = in(reg) sums.add(2 * TILE),
                s1 = in(reg) sums.add(3 * TILE),
                st = in(reg) 64usize,
                options(nostack),
            );
        }
    }
}

/// Adds one (pair, block) step's sums to the pair's accumulators, one token per row.
///
/// # Safety
/// the AMX path; `sums` as written by [`block_step`] for `tt` token tiles.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn finish_step<W: TileWeights>(
    tt: usize,
    (x0, x1): (&W::Block, &W::Block),
    ys: &[TokenBlock],
    sums: *const u8,
    acc: &mut [[f32; PAIR]],
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        // Here, where `consts` inlines, so its 384 bytes stay in registers.
        let c = &W::consts(x0, x1);
        for (i, (acc, y)) in acc.iter_mut().zip(ys).enumerate().take(tt * TILE_TOKENS) {
            let tile = sums.add((i / TILE_TOKENS) * 2 * TILE + (i % TILE_TOKENS) * 64);
            let hi = _mm512_loadu_si512(tile as *const __m512i);
            let lo = _mm512_loadu_si512(tile.add(TILE) as *const __m512i);
            let isum = _mm512_add_epi32(_mm512_slli_epi32(hi, 7), lo);
            let a = W::finish(c, y, isum, _mm512_loadu_ps(acc.as_ptr()));
            _mm512_storeu_ps(acc.as_mut_ptr(), a);
        }
    }
}

/// Rows of groups `g0..g1` (whole pairs) × tokens `0..n` (a multiple of 16) of `w`, each
/// run of tokens' 16 rows of pair `g` passed to `put(g, first token, rows per token)`.
///
/// # Safety
/// the AMX path; `g0..g1` an even run of existing groups; `act` and `sides` hold `n` token
/// rows of `w.nb` blocks.
pub unsafe fn matmul_pairs<W: TileWeights>(
    w: &W,
    g0: usize,
    g1: usize,
    (act, sides): (&[BlockQ8K], &[Q8KSide]),
    n: usize,
    put: &mut PutRows,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let gw = w.grouped();
        let nb = gw.nb;
        let blocks = &gw.blocks[..];
        let per_pair = nb * PANEL_BLOCK;
        let pairs_per_pass = (PANEL_BUDGET / per_pair).max(1);
        let stride = nb * std::mem::size_of::<BlockQ8K>();
        SCRATCH.with(|s| {
            let (panels, accs) = &mut *s.borrow_mut();
            let _tiles = Tiles::configure(64);
            let mut sums = [[Line64([0; 64]); 4 * TILE / 64]; 2];
            let mut ys = [[TokenBlock::default(); 2 * TILE_TOKENS]; 2];
            for p0 in (g0..g1).step_by(2 * pairs_per_pass) {
                let p1 = (p0 + 2 * pairs_per_pass).min(g1);
                let np = (p1 - p0) / 2;
                panels.resize(np * per_pair / 64, Line64([0; 64]));
                for p in 0..np {
                    let g = p0 + 2 * p;
                    for b in 0..nb {
                        let out = panels
                            .as_mut_ptr()
                            .cast::<u8>()
                            .add(p * per_pair + b * PANEL_BLOCK);
                        W::unpack(&blocks[g * nb + b], &blocks[(g + 1) * nb + b], out);
                    }
                }
                accs.resize(np * 2 * TILE_TOKENS, [0.0; PAIR]);
                let mut t0 = 0;
                while t0 < n {
                    let tt = if n - t0 >= 2 * TILE_TOKENS { 2 } else { 1 };
                    accs.iter_mut().for_each(|a| *a = [0.0; PAIR]);
                    let span = 2 * TILE_TOKENS;
                    // Each step's sums are finished during the next step's tile work (two buffers
                    // of sums and of token sides), so the vector and tile units overlap.
                    let mut pending: Option<(usize, usize)> = None;
                    let mut step = 0;
                    // Finishes pair `p`'s step at block `at` from its sums.
                    let mut finish =
                        |(p, at): (usize, usize), ys: &[TokenBlock], sums: *const u8| {
                            let g = p0 + 2 * p;
                            let x = (&blocks[g * nb + at], &blocks[(g + 1) * nb + at]);
                            finish_step::<W>(tt, x, ys, sums, &mut accs[p * span..(p + 1) * span]);
                        };
                    for b in 0..nb {
                        let act_b = ActTiles {
                            base: act.as_ptr().add(t0 * nb + b),
                            stride,
                        };
                        for (i, y) in ys[b % 2].iter_mut().enumerate().take(tt * TILE_TOKENS) {
                            let at = (t0 + i) * nb + b;
                            *y = TokenBlock::of(act.get_unchecked(at), sides.get_unchecked(at));
                        }
                        for p in 0..np {
                            let panel = panels
                                .as_ptr()
                                .cast::<u8>()
                                .add(p * per_pair + b * PANEL_BLOCK);
                            let buf = sums[step % 2].as_mut_ptr().cast::<u8>();
                            if tt == 2 {
                                block_step::<2>(act_b, panel, buf);
                            } else {
                                block_step::<1>(act_b, panel, buf);
                            }
                            if let Some(prev) = pending.take() {
                                let sums = sums[(step + 1) % 2].as_ptr().cast::<u8>();
                                finish(prev, &ys[prev.1 % 2], sums);
                            }
                            pending = Some((p, b));
                            step += 1;
                        }
                    }
                    if let Some(prev) = pending {
                        let sums = sums[(step + 1) % 2].as_ptr().cast::<u8>();
                        finish(prev, &ys[prev.1 % 2], sums);
                    }
                    for p in 0..np {
                        put(p0 + 2 * p, t0, &accs[p * span..p * span + tt * TILE_TOKENS]);
                    }
                    t0 += tt * TILE_TOKENS;
                }
            }
        });
    }
}
