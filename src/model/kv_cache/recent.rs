//! Recent keys in f16 beside a quantized key cache. A query reads the keys of its own group of
//! [`RECENT_GROUP`] positions (the nearest ones, which attention weighs most) in f16, and only
//! older keys as quantized. Qwen2.5-0.5B's perplexity with Q4_0 keys: +14% over f16 with every
//! key quantized, +1.3% with the own group in f16 (tests/data/ppl-text.txt, -c 512).
//!
//! Which keys a query reads in f16 depends only on its position, never on what else is in its
//! batch, so a prompt, a verify batch of drafts and one token at a time see the same keys.
//! The f16 copies live in a ring of [`RING_ROWS`] rows per (layer, KV head, sequence), written
//! with the quantized rows; a rewind within the ring keeps them exact, a deeper one (a prompt
//! cache reused from an older point) widens the quantized rows back into the ring.

use std::ops::Range;

use half::f16;

use super::HeadRows;
use crate::kernels;

/// Positions per group: a query at `pos` reads rows `group_start(pos)..=pos` in f16.
pub(super) const RECENT_GROUP: usize = 32;

/// Rows of f16 keys kept per (layer, KV head, sequence): a forward pass adds at most
/// `RING_ROWS - 2 * RECENT_GROUP` rows to a sequence (see [`Ring::rows_per_pass`]), so a pass
/// never overwrites the group before its first token's, and a rewind of up to a group stays
/// exact even after a failed pass.
const RING_ROWS: usize = 256;

/// The first position of `pos`'s group.
pub fn group_start(pos: usize) -> usize {
    pos - pos % RECENT_GROUP
}

/// Rows per ring: [`RING_ROWS`], or the whole context rounded up to a group when smaller.
pub(super) fn ring_rows(n_ctx: usize) -> usize {
    RING_ROWS.min(n_ctx.next_multiple_of(RECENT_GROUP))
}

/// The rings' rows, and which positions each sequence's rings hold (every layer's rings of a
/// sequence are written together; their head sizes may differ by layer).
#[derive(Clone, Debug)]
pub(super) struct Ring {
    /// Rows per ring ([`ring_rows`]).
    pub rows: usize,
    /// Per sequence: positions from this one up to its length are exact in its rings.
    pub exact_from: Vec<usize>,
}

impl Ring {
    pub fn new(n_ctx: usize, n_seq: usize) -> Ring {
        Ring {
            rows: ring_rows(n_ctx),
            exact_from: vec![0; n_seq],
        }
    }

    /// Bytes of one ring of heads of `head_dim` values.
    pub fn bytes(&self, head_dim: usize) -> usize {
        self.rows * head_dim * 2
    }

    /// Most rows one forward pass may add to a sequence of `n_ctx` positions.
    pub fn rows_per_pass(&self, n_ctx: usize) -> usize {
        if self.rows >= n_ctx {
            usize::MAX
        } else {
            self.rows - 2 * RECENT_GROUP
        }
    }

    /// Byte range in a ring of heads of `head_dim` values of the row for position `pos`.
    pub fn slot(&self, pos: usize, head_dim: usize) -> Range<usize> {
        let at = pos % self.rows * head_dim * 2;
        at..at + head_dim * 2
    }

    /// Notes that position `pos` of `seq` was written: its slot held `pos - rows` before.
    pub fn wrote(&mut self, seq: usize, pos: usize) {
        let first_kept = (pos + 1).saturating_sub(self.rows);
        let e = &mut self.exact_from[seq];
        *e = (*e).max(first_kept);
    }
}

/// One KV head's keys as a query at one position reads them: rows before `f16_from` as stored,
/// rows from it on from the ring (f16). For an f16 cache, all as stored.
#[derive(Clone, Copy)]
pub struct KeyRows<'a> {
    pub stored: HeadRows<'a>,
    /// First cache row read from `ring` (`usize::MAX`: none).
    pub f16_from: usize,
    /// The sequence's ring for this layer and head, and the cache row of its position 0.
    pub ring: &'a [f16],
    pub seq_row0: usize,
    pub head_dim: usize,
}

impl KeyRows<'_> {
    /// Rows `r` widened to f32 into `out`.
    pub fn widen(&self, r: Range<usize>, out: &mut [f32]) {
        let hd = self.head_dim;
        let split = self.f16_from.clamp(r.start, r.end);
        let (old, recent) = out[..r.len() * hd].split_at_mut((split - r.start) * hd);
        if split > r.start {
            self.stored.widen(r.start..split, old);
        }
        let ring_rows = self.ring.len() / hd;
        let backend = kernels::backend();
        for (row, o) in (split..r.end).zip(recent.chunks_exact_mut(hd)) {
            let slot = (row - self.seq_row0) % ring_rows;
            backend.f16_row_to_f32(&self.ring[slot * hd..][..hd], o);
        }
    }
}
