//! Per-context key/value cache, in the type chosen per context for keys and for values (f16 by
//! default, as llama.cpp; Q8_0 or Q4_0 for long contexts in less memory). A context holding
//! several sequences gives each its own region of `n_ctx` positions, so a sequence never sees
//! another's keys and can be truncated without moving the others.
//!
//! Head-major: each layer's keys of one KV head are one run of rows, so attention streams a
//! head's rows from contiguous memory. Quantized keys keep their latest rows in f16 too
//! ([`recent`]).

mod kv_type;
mod recent;

pub use kv_type::KvType;
use recent::Ring;
pub use recent::{group_start, KeyRows};

use half::f16;
use memmap2::MmapMut;

use super::attention::QueryPlace;
use super::error::ModelError;
use super::hparams::{HParams, HeadShape};
use crate::quant::blocks::{cast_blocks, cast_blocks_mut};

/// The shape of one side (keys or values) of a cache layer.
#[derive(Clone, Copy, Debug)]
struct Side {
    ty: KvType,
    head_dim: usize,
    /// Bytes of one head's row.
    row_bytes: usize,
    /// The Walsh-Hadamard block a quantized side's rows are rotated in before they are stored
    /// (see [`KvCache::rotation_k`]); `None`: stored as they are.
    rotation: Option<usize>,
}

impl Side {
    fn new(ty: KvType, head_dim: usize, rotation: Option<usize>) -> Side {
        Side {
            ty,
            head_dim,
            row_bytes: ty.row_bytes(head_dim),
            rotation: rotation.filter(|_| ty != KvType::F16 && head_dim.is_multiple_of(64)),
        }
    }
}

/// One cache layer: its heads and where they sit in the cache's mapping.
#[derive(Clone, Copy, Debug)]
struct Slab {
    n_head_kv: usize,
    k: Side,
    v: Side,
    /// Byte offsets of its keys and its values (per KV head `rows` rows each) and of its rings
    /// (per KV head, per sequence).
    keys_at: usize,
    values_at: usize,
    rings_at: usize,
}

/// Keys and values of every layer for `n_seq` sequences of positions `0..n_ctx`: cache row
/// `seq * n_ctx + pos`, stored per (layer, KV head) as `rows` consecutive rows. Layers may
/// differ in KV heads and head sizes (Gemma 4's sliding and global layers).
pub struct KvCache {
    /// Positions per sequence.
    pub n_ctx: usize,
    /// Cache rows per layer: `n_seq * n_ctx`.
    rows: usize,
    n_seq: usize,
    layers: Vec<Slab>,
    /// Quantized keys' recent rows in f16 (`None` for f16 keys).
    ring: Option<Ring>,
    /// Every layer's keys, then every layer's values, then the rings. Anonymous memory is zero
    /// and takes no RAM until written, so a context costs memory for the positions it has
    /// used, not for all of `n_ctx` (a 32k-token context holding a short chat stays small).
    mem: MmapMut,
}

/// The shape of a cache: per layer, its KV heads and their key and value sizes.
#[derive(Clone, Debug)]
pub struct KvShape {
    /// Per cache layer: its heads (their query head count does not matter here).
    pub layers: Vec<HeadShape>,
    pub n_ctx: usize,
    pub n_seq: usize,
    pub type_k: KvType,
    pub type_v: KvType,
}

impl KvShape {
    /// The cache of a model's layers that store keys and values.
    pub fn of(hp: &HParams, n_ctx: usize, n_seq: usize, type_k: KvType, type_v: KvType) -> Self {
        KvShape {
            layers: hp.attention_layers.iter().map(|&il| hp.heads(il)).collect(),
            n_ctx,
            n_seq,
            type_k,
            type_v,
        }
    }

    /// Bytes a cache of this shape takes with every position written (`None`: past the
    /// address space).
    pub fn bytes(&self) -> Option<usize> {
        self.layers
            .iter()
            .try_fold(0usize, |sum, h| sum.checked_add(self.layer_bytes(h)?))
    }

    /// Bytes of one layer's keys, values and rings.
    fn layer_bytes(&self, h: &HeadShape) -> Option<usize> {
        let row = self.type_k.row_bytes(h.head_dim_k) + self.type_v.row_bytes(h.head_dim_v);
        let ring_rows = match self.type_k {
            KvType::F16 => 0,
            _ => recent::ring_rows(self.n_ctx),
        };
        self.n_ctx
            .checked_mul(row)?
            .checked_add(ring_rows * h.head_dim_k * 2)?
            .checked_mul(self.n_seq)?
            .checked_mul(h.n_head_kv)
    }
}

/// A cache layer of `n_head_kv` heads, keys of `head_dim_k` values and values of `head_dim_v`
/// (tests).
#[cfg(test)]
pub(crate) fn kv_heads(n_head_kv: usize, head_dim_k: usize, head_dim_v: usize) -> HeadShape {
    HeadShape {
        n_head: n_head_kv,
        n_head_kv,
        head_dim_k,
        head_dim_v,
    }
}

/// One KV head's rows of one layer, as stored.
#[derive(Clone, Copy)]
pub struct HeadRows<'a> {
    pub ty: KvType,
    pub row_bytes: usize,
    pub data: &'a [u8],
}

impl<'a> HeadRows<'a> {
    /// Rows `r` widened to f32 into `out` (a row's values each).
    pub fn widen(&self, r: std::ops::Range<usize>, out: &mut [f32]) {
        self.ty.decode(self.bytes(r), out)
    }

    /// The bytes of rows `r`.
    pub fn bytes(&self, r: std::ops::Range<usize>) -> &'a [u8] {
        &self.data[r.start * self.row_bytes..r.end * self.row_bytes]
    }

    /// Rows `r` as f16 values (an f16 side only).
    pub fn f16_rows(&self, r: std::ops::Range<usize>) -> &'a [f16] {
        assert_eq!(self.ty, KvType::F16, "f16_rows of a {} cache", self.ty);
        cast_blocks(self.bytes(r)).expect("f16 rows at even offsets of a page-aligned mapping")
    }
}

impl KvCache {
    /// Reserves the cache; a failed reservation is an error, not an abort (a host asking for
    /// a long context on a small machine gets OUT_OF_MEMORY back). A quantized type needs head
    /// sizes that are whole blocks of 32.
    pub fn new(s: &KvShape) -> Result<KvCache, ModelError> {
        for h in &s.layers {
            for (ty, dim, which) in [
                (s.type_k, h.head_dim_k, "keys"),
                (s.type_v, h.head_dim_v, "values"),
            ] {
                if dim % ty.block_len() != 0 {
                    return Err(ModelError::InvalidArgument(format!(
                        "a {ty} KV cache stores {which} in blocks of {}, and this model's \
                         heads have {dim} values: use f16",
                        ty.block_len()
                    )));
                }
            }
        }
        let too_big = || {
            ModelError::OutOfMemory(format!(
                "the KV cache for n_ctx {} x {} sequences overflows the address space",
                s.n_ctx, s.n_seq
            ))
        };
        let rows = s.n_ctx.checked_mul(s.n_seq).ok_or_else(too_big)?;
        let bytes = s.bytes().ok_or_else(too_big)?;
        let ring = (s.type_k != KvType::F16).then(|| Ring::new(s.n_ctx, s.n_seq));
        let layers = slabs(s, rows, ring.as_ref());
        let mem = MmapMut::map_anon(bytes.max(1)).map_err(|e| {
            ModelError::OutOfMemory(format!(
                "cannot reserve the KV cache ({} MiB) for n_ctx {} x {} sequences: {e}",
                bytes >> 20,
                s.n_ctx,
                s.n_seq
            ))
        })?;
        Ok(KvCache {
            n_ctx: s.n_ctx,
            rows,
            n_seq: s.n_seq,
            layers,
            ring,
            mem,
        })
    }

    /// Bytes the whole cache takes once every position is written.
    pub fn bytes(&self) -> usize {
        self.mem.len()
    }

    /// Quantized keys of cache layer `layer` are stored rotated by an orthonormal
    /// Walsh-Hadamard transform of this many values (a head size that is a multiple of 64),
    /// which spreads outlier channels (large in Qwen's keys) over the block before it is
    /// quantized; the queries are rotated alike, so their dot products are the same. llama.cpp
    /// does the same; without it a Q8_0 cache of Qwen2.5-0.5B loses 6.6% perplexity instead of
    /// 3.3% (0.8% with the keys also centered, 0.2% also balanced: see `context::centering` and
    /// `context::balance`).
    pub fn rotation_k(&self, layer: usize) -> Option<usize> {
        self.layers[layer].k.rotation
    }

    /// As [`KvCache::rotation_k`] for values, in blocks of 64: the attention output comes out
    /// rotated too, and is rotated back (the transform is its own inverse).
    pub fn rotation_v(&self, layer: usize) -> Option<usize> {
        self.layers[layer].v.rotation
    }

    pub fn type_k(&self) -> KvType {
        self.layers.first().map_or(KvType::F16, |l| l.k.ty)
    }

    pub fn type_v(&self) -> KvType {
        self.layers.first().map_or(KvType::F16, |l| l.v.ty)
    }

    /// Byte range of a (layer, head)'s keys (`values`: false) or values.
    fn span(&self, layer: usize, head: usize, values: bool) -> std::ops::Range<usize> {
        let slab = &self.layers[layer];
        assert!(
            head < slab.n_head_kv,
            "layer {layer} head {head} out of range"
        );
        let (base, side) = match values {
            true => (slab.values_at, slab.v),
            false => (slab.keys_at, slab.k),
        };
        let start = base + head * self.rows * side.row_bytes;
        start..start + self.rows * side.row_bytes
    }

    /// Row of the cache holding `pos` of sequence `seq`.
    pub fn row(&self, seq: usize, pos: usize) -> usize {
        seq * self.n_ctx + pos
    }

    /// Stores one token's key and value rows (every KV head's, [n_head_kv * head_dim]) for a
    /// layer at cache row `row`.
    pub fn store(&mut self, layer: usize, row: usize, k_row: &[f32], v_row: &[f32]) {
        self.store_keys(layer, row, k_row);
        self.encode_row(layer, row, v_row, true);
    }

    /// Encodes one token's keys (`values`: false) or values of every KV head into row `row`.
    fn encode_row(&mut self, layer: usize, row: usize, x: &[f32], values: bool) {
        let slab = self.layers[layer];
        let side = if values { slab.v } else { slab.k };
        assert!(row < self.rows, "cache row {row} out of range");
        assert_eq!(x.len(), slab.n_head_kv * side.head_dim, "KV row length");
        for (h, head) in x.chunks_exact(side.head_dim).enumerate() {
            let at = self.span(layer, h, values).start + row * side.row_bytes;
            side.ty.encode(head, &mut self.mem[at..at + side.row_bytes]);
        }
    }

    /// One token's keys of a layer (every KV head's, [n_head_kv * head_dim_k]) from cache row
    /// `row`, widened to f32.
    pub fn load_keys(&self, layer: usize, row: usize, out: &mut [f32]) {
        for (h, head) in out
            .chunks_exact_mut(self.layers[layer].k.head_dim)
            .enumerate()
        {
            self.keys(layer, h).widen(row..row + 1, head);
        }
    }

    /// Overwrites one token's keys of a layer at cache row `row` (as [`KvCache::store`] does),
    /// and their f16 copy in the ring where keys are quantized.
    pub fn store_keys(&mut self, layer: usize, row: usize, k_row: &[f32]) {
        self.encode_row(layer, row, k_row, false);
        if self.ring.is_some() {
            for (h, head) in k_row
                .chunks_exact(self.layers[layer].k.head_dim)
                .enumerate()
            {
                self.store_recent(layer, h, row, head);
            }
        }
    }

    /// Writes a head's key row into its ring (nothing for f16 keys).
    fn store_recent(&mut self, layer: usize, head: usize, row: usize, key: &[f32]) {
        use half::slice::HalfFloatSliceExt;
        let (seq, pos) = (row / self.n_ctx, row % self.n_ctx);
        let Some(at) = self.ring_span(layer, head, seq) else {
            return;
        };
        let ring = self.ring.as_mut().expect("a ring span has a ring");
        let slot = ring.slot(pos, key.len());
        ring.wrote(seq, pos);
        let bytes = &mut self.mem[at.start + slot.start..at.start + slot.end];
        cast_blocks_mut::<f16>(bytes)
            .expect("ring rows at even offsets")
            .convert_from_f32_slice(key);
    }

    /// Byte range of the ring of (layer, head, seq), if keys are quantized.
    fn ring_span(&self, layer: usize, head: usize, seq: usize) -> Option<std::ops::Range<usize>> {
        let ring = self.ring.as_ref()?;
        let slab = &self.layers[layer];
        let bytes = ring.bytes(slab.k.head_dim);
        let start = slab.rings_at + (head * self.n_seq + seq) * bytes;
        Some(start..start + bytes)
    }

    /// KV head `head`'s keys of a layer as the query at `place` reads them: its own group of
    /// [`recent::RECENT_GROUP`] positions from the f16 ring where keys are quantized.
    pub fn keys_for(&self, layer: usize, head: usize, place: QueryPlace) -> KeyRows<'_> {
        let stored = self.keys(layer, head);
        let head_dim = self.layers[layer].k.head_dim;
        let seq = place.seq_row0 / self.n_ctx;
        match self.ring_span(layer, head, seq) {
            Some(span) => KeyRows {
                stored,
                f16_from: place.seq_row0 + group_start(place.pos),
                ring: cast_blocks(&self.mem[span]).expect("ring rows at even offsets"),
                seq_row0: place.seq_row0,
                head_dim,
            },
            None => KeyRows {
                stored,
                f16_from: usize::MAX,
                ring: &[],
                seq_row0: place.seq_row0,
                head_dim,
            },
        }
    }

    /// Whether queries read their own group of keys in f16 (quantized keys): prompt tiles then
    /// hold one group's tokens each.
    pub fn has_recent(&self) -> bool {
        self.ring.is_some()
    }

    /// Most tokens one forward pass may add to a sequence (see [`recent`]).
    pub fn rows_per_pass(&self) -> usize {
        self.ring
            .as_ref()
            .map_or(usize::MAX, |r| r.rows_per_pass(self.n_ctx))
    }

    /// Sequence `seq` now holds `n` positions (after a rewind, or a failed pass): the ring gets
    /// the f16 keys its next query reads, widened from the quantized rows where a deeper rewind
    /// has overwritten them.
    pub fn truncate_seq(&mut self, seq: usize, n: usize) {
        let Some(ring) = &self.ring else { return };
        let from = group_start(n);
        if from < ring.exact_from[seq] {
            self.refill_recent(seq, from..n);
        }
    }

    /// Rewrites the ring rows of positions `r` of `seq` from the quantized keys.
    pub fn refill_recent(&mut self, seq: usize, r: std::ops::Range<usize>) {
        if self.ring.is_none() {
            return;
        }
        for layer in 0..self.layers.len() {
            let slab = self.layers[layer];
            let mut key = vec![0f32; slab.k.head_dim];
            for h in 0..slab.n_head_kv {
                for pos in r.clone() {
                    let row = self.row(seq, pos);
                    self.keys(layer, h).widen(row..row + 1, &mut key);
                    self.store_recent(layer, h, row, &key);
                }
            }
        }
        if let Some(ring) = &mut self.ring {
            ring.exact_from[seq] = r.start;
        }
    }

    /// Copies a layer's keys and values of cache row `src` to row `dst`, as stored.
    pub fn copy_row(&mut self, layer: usize, src: usize, dst: usize) {
        assert!(src < self.rows && dst < self.rows, "cache row out of range");
        let slab = self.layers[layer];
        for (side, values) in [(slab.k, false), (slab.v, true)] {
            for h in 0..slab.n_head_kv {
                let base = self.span(layer, h, values).start;
                let n = side.row_bytes;
                self.mem
                    .copy_within(base + src * n..base + (src + 1) * n, base + dst * n);
            }
        }
    }

    /// Where sequence `seq`'s first `n` positions are stored: one byte range per (layer, KV
    /// head) of keys, then the same for values, then (quantized keys) per (layer, KV head) the
    /// f16 keys of the last group, `group_start(n)..n` (what saved state holds, in this order).
    fn seq_runs(&self, seq: usize, n: usize) -> Vec<std::ops::Range<usize>> {
        assert!(n <= self.n_ctx, "{n} positions of {}", self.n_ctx);
        let row0 = self.row(seq, 0);
        let heads: usize = self.layers.iter().map(|l| l.n_head_kv).sum();
        let mut runs = Vec::with_capacity(3 * heads);
        for values in [false, true] {
            for (layer, slab) in self.layers.iter().enumerate() {
                let side = if values { slab.v } else { slab.k };
                for h in 0..slab.n_head_kv {
                    let start = self.span(layer, h, values).start + row0 * side.row_bytes;
                    runs.push(start..start + n * side.row_bytes);
                }
            }
        }
        if let Some(ring) = &self.ring {
            // Contiguous: a ring is whole groups, and a group's rows are consecutive slots.
            for (layer, slab) in self.layers.iter().enumerate() {
                let hd = slab.k.head_dim;
                let first = ring.slot(group_start(n), hd).start;
                let len = (n - group_start(n)) * hd * 2;
                for h in 0..slab.n_head_kv {
                    let span = self.ring_span(layer, h, seq).expect("keys with a ring");
                    runs.push(span.start + first..span.start + first + len);
                }
            }
        }
        runs
    }

    /// Copies sequence `src`'s first `n` positions, as stored, over sequence `dst`'s.
    pub fn copy_seq(&mut self, src: usize, dst: usize, n: usize) {
        for (from, to) in self.seq_runs(src, n).into_iter().zip(self.seq_runs(dst, n)) {
            self.mem.copy_within(from, to.start);
        }
        self.recent_filled(dst, n);
    }

    /// The ring of `seq` holds the f16 keys of its last group, as [`KvCache::seq_runs`] copied.
    fn recent_filled(&mut self, seq: usize, n: usize) {
        if let Some(ring) = &mut self.ring {
            ring.exact_from[seq] = group_start(n);
        }
    }

    /// Sequence `seq`'s first `n` positions as stored, in [`KvCache::seq_runs`] order.
    pub fn seq_bytes(&self, seq: usize, n: usize) -> impl Iterator<Item = &[u8]> {
        self.seq_runs(seq, n).into_iter().map(|r| &self.mem[r])
    }

    /// Fills sequence `seq`'s first `n` positions run by run (in [`KvCache::seq_bytes`]
    /// order) with what `fill` writes into each.
    pub fn fill_seq<E>(
        &mut self,
        seq: usize,
        n: usize,
        mut fill: impl FnMut(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        for r in self.seq_runs(seq, n) {
            fill(&mut self.mem[r])?;
        }
        self.recent_filled(seq, n);
        Ok(())
    }

    /// What a saved state must match to be loaded into this cache, summed over its layers:
    /// layers, KV heads, values per position of keys and of values, their types, and the
    /// largest Hadamard blocks. (A row's bytes are linear in its values, so these sums give a
    /// state's size.)
    pub fn layout(&self) -> [u32; 8] {
        let sum = |f: fn(&Slab) -> usize| self.layers.iter().map(f).sum::<usize>() as u32;
        let rot = |f: fn(&Slab) -> Option<usize>| {
            self.layers.iter().filter_map(f).max().unwrap_or(0) as u32
        };
        [
            self.layers.len() as u32,
            sum(|l| l.n_head_kv),
            sum(|l| l.n_head_kv * l.k.head_dim),
            sum(|l| l.n_head_kv * l.v.head_dim),
            self.type_k() as u32,
            self.type_v() as u32,
            rot(|l| l.k.rotation),
            rot(|l| l.v.rotation),
        ]
    }

    /// A layer's keys of KV head `head`, all rows.
    pub fn keys(&self, layer: usize, head: usize) -> HeadRows<'_> {
        self.head_rows(layer, head, false)
    }

    /// A layer's values of KV head `head`, all rows.
    pub fn values(&self, layer: usize, head: usize) -> HeadRows<'_> {
        self.head_rows(layer, head, true)
    }

    fn head_rows(&self, layer: usize, head: usize, values: bool) -> HeadRows<'_> {
        let slab = &self.layers[layer];
        let side = if values { slab.v } else { slab.k };
        HeadRows {
            ty: side.ty,
            row_bytes: side.row_bytes,
            data: &self.mem[self.span(layer, head, values)],
        }
    }
}

/// Each layer's place in the mapping: every layer's keys, then every layer's values, then
/// (quantized keys) every layer's rings.
fn slabs(s: &KvShape, rows: usize, ring: Option<&Ring>) -> Vec<Slab> {
    let mut out = Vec::with_capacity(s.layers.len());
    let (mut keys, mut values, mut rings) = (0, 0, 0);
    for h in &s.layers {
        // llama.cpp's choice of blocks (and so its rounding): keys in the largest power of two
        // dividing the head, values in 64s.
        let k = Side::new(
            s.type_k,
            h.head_dim_k,
            Some(1 << h.head_dim_k.trailing_zeros()),
        );
        let v = Side::new(s.type_v, h.head_dim_v, Some(64));
        out.push(Slab {
            n_head_kv: h.n_head_kv,
            k,
            v,
            keys_at: keys,
            values_at: values,
            rings_at: rings,
        });
        keys += h.n_head_kv * rows * k.row_bytes;
        values += h.n_head_kv * rows * v.row_bytes;
        rings += ring.map_or(0, |r| h.n_head_kv * s.n_seq * r.bytes(h.head_dim_k));
    }
    // The values follow every layer's keys, the rings every layer's values.
    for slab in &mut out {
        slab.values_at += keys;
        slab.rings_at += keys + values;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of the cache's mapping that are resident (`mincore`).
    #[cfg(target_os = "linux")]
    fn resident_bytes(kv: &KvCache) -> usize {
        let page = 4096;
        let mut vec = vec![0u8; kv.mem.len().div_ceil(page)];
        // SAFETY: the mapping is live and page-aligned; `vec` has one byte per page.
        let rc =
            unsafe { libc::mincore(kv.mem.as_ptr() as *mut _, kv.mem.len(), vec.as_mut_ptr()) };
        assert_eq!(rc, 0);
        vec.iter().filter(|&&b| b & 1 != 0).count() * page
    }

    fn shape(n_layer: usize, n_ctx: usize, n_seq: usize, ty: KvType) -> KvShape {
        KvShape {
            layers: vec![kv_heads(2, 64, 32); n_layer],
            n_ctx,
            n_seq,
            type_k: ty,
            type_v: ty,
        }
    }

    /// Rows land in their own layer's and head's keys and values, at the row asked for, in
    /// the cache's type, and the rest reads as zero.
    #[test]
    fn rows_round_trip_per_layer_and_head() {
        for ty in KvType::all() {
            let (n_layer, n_ctx, n_seq) = (3, 5, 2);
            let mut kv = KvCache::new(&shape(n_layer, n_ctx, n_seq, ty)).unwrap();
            let value = |layer: usize, row: usize, d: usize| (100 * layer + 10 * row + d) as f32;
            for layer in 0..n_layer {
                for row in [0, 7, 9] {
                    let k: Vec<f32> = (0..128).map(|d| value(layer, row, d)).collect();
                    let v: Vec<f32> = (0..64).map(|d| -value(layer, row, d)).collect();
                    kv.store(layer, row, &k, &v);
                }
            }
            // f16 holds these integers exactly; Q8_0 within half a step of the block's
            // largest value / 127, Q4_0 of / 8.
            let tol = |max: f32| match ty {
                KvType::F16 => 0.0,
                KvType::Q8_0 => max / 127.0,
                KvType::Q4_0 => max / 8.0 + 1e-3,
            };
            for layer in 0..n_layer {
                for head in 0..2 {
                    let (keys, values) = (kv.keys(layer, head), kv.values(layer, head));
                    assert_eq!(keys.data.len(), n_ctx * n_seq * ty.row_bytes(64));
                    for row in 0..n_ctx * n_seq {
                        let stored = [0, 7, 9].contains(&row);
                        let mut k = vec![0f32; 64];
                        let mut v = vec![0f32; 32];
                        crate::quant::dequant::dequantize_row(
                            ty.ggml(),
                            keys.bytes(row..row + 1),
                            &mut k,
                        )
                        .unwrap();
                        crate::quant::dequant::dequantize_row(
                            ty.ggml(),
                            values.bytes(row..row + 1),
                            &mut v,
                        )
                        .unwrap();
                        for (d, got) in k.iter().enumerate() {
                            let want = if stored {
                                value(layer, row, head * 64 + d)
                            } else {
                                0.0
                            };
                            let max = value(layer, row, head * 64 + (d / 32 + 1) * 32 - 1);
                            assert!((got - want).abs() <= tol(max), "{ty} k {got} vs {want}");
                        }
                        for (d, got) in v.iter().enumerate() {
                            let want = if stored {
                                -value(layer, row, head * 32 + d)
                            } else {
                                0.0
                            };
                            let max = value(layer, row, head * 32 + 31);
                            assert!((got - want).abs() <= tol(max), "{ty} v {got} vs {want}");
                        }
                    }
                }
            }
        }
    }

    /// Key rows of a 1-layer Q4_0 cache with `n` positions of sequence 1 stored (`key(pos)`).
    fn q4_keys(n_ctx: usize, n: usize, key: impl Fn(usize) -> Vec<f32>) -> KvCache {
        let mut kv = KvCache::new(&shape(1, n_ctx, 2, KvType::Q4_0)).unwrap();
        for pos in 0..n {
            kv.store(0, kv.row(1, pos), &key(pos), &[0.0; 64]);
        }
        kv
    }

    fn sample_key(pos: usize) -> Vec<f32> {
        (0..128)
            .map(|d| ((pos * 131 + d * 17) % 97) as f32 / 13.0 - 3.0)
            .collect()
    }

    /// Rows `r` of head 0 as the query at `pos` of sequence 1 reads them.
    fn read(kv: &KvCache, pos: usize, r: std::ops::Range<usize>) -> Vec<f32> {
        let place = QueryPlace {
            seq_row0: kv.row(1, 0),
            pos,
        };
        let mut out = vec![0f32; r.len() * 64];
        let row0 = kv.row(1, 0);
        kv.keys_for(0, 0, place)
            .widen(row0 + r.start..row0 + r.end, &mut out);
        out
    }

    fn f16_round(x: &[f32]) -> Vec<f32> {
        x.iter().map(|&v| f16::from_f32(v).to_f32()).collect()
    }

    /// Head 0's stored (quantized) key at `pos` of sequence 1, widened.
    fn quantized(kv: &KvCache, pos: usize) -> Vec<f32> {
        let mut out = vec![0f32; 64];
        let row = kv.row(1, pos);
        kv.keys(0, 0).widen(row..row + 1, &mut out);
        out
    }

    /// A query reads its own group's keys in f16 and older keys as quantized, whether it reads
    /// them one by one or across the group boundary.
    #[test]
    fn a_query_reads_its_own_group_of_keys_in_f16() {
        let kv = q4_keys(512, 100, sample_key);
        let pos = 70;
        let got = read(&kv, pos, 60..71);
        for (i, p) in (60..71).enumerate() {
            let row = &got[i * 64..(i + 1) * 64];
            if p >= group_start(pos) {
                assert_eq!(row, f16_round(&sample_key(p)[..64]), "own group row {p}");
            } else {
                assert_eq!(row, quantized(&kv, p), "older row {p}");
                assert_ne!(row, f16_round(&sample_key(p)[..64]), "Q4_0 is not f16");
            }
        }
        // One row at a time reads the same.
        for (i, p) in (60..71).enumerate() {
            assert_eq!(read(&kv, pos, p..p + 1), got[i * 64..(i + 1) * 64]);
        }
    }

    /// A rewind within the ring keeps the recent keys exact; a deeper one widens them back from
    /// the quantized rows; saved runs and copies carry the last group's f16 keys along.
    #[test]
    fn rewinds_keep_or_refill_the_recent_keys() {
        let mut kv = q4_keys(1024, 600, sample_key);
        assert!(kv.rows_per_pass() < 256, "a pass fits in the ring");
        kv.truncate_seq(1, 590);
        assert_eq!(
            read(&kv, 589, 576..590)[..64],
            f16_round(&sample_key(576)[..64])
        );
        kv.truncate_seq(1, 100);
        let got = read(&kv, 99, 96..100);
        for (i, p) in (96..100).enumerate() {
            let want = f16_round(&quantized(&kv, p));
            assert_eq!(got[i * 64..(i + 1) * 64], want, "refilled row {p}");
        }
        // New rows are exact again, and a copy carries the ring's last group.
        for pos in 100..105 {
            kv.store(0, kv.row(1, pos), &sample_key(pos), &[0.0; 64]);
        }
        kv.copy_seq(1, 0, 105);
        let row0 = kv.row(0, 0);
        let mut copied = vec![0f32; 64];
        let place = QueryPlace {
            seq_row0: row0,
            pos: 104,
        };
        kv.keys_for(0, 0, place)
            .widen(row0 + 104..row0 + 105, &mut copied);
        assert_eq!(copied, f16_round(&sample_key(104)[..64]));
        let ring_bytes: usize = kv.seq_runs(1, 105).iter().skip(4).map(|r| r.len()).sum();
        assert_eq!(
            ring_bytes,
            2 * (105 - 96) * 64 * 2,
            "state holds the last group"
        );
    }

    /// Layers of their own shapes (Gemma 4: 2 KV heads of 32 on sliding layers, 1 of 64 on
    /// global ones) each keep their rows apart, in their own sizes, rings included; a
    /// sequence's saved runs are the layers' rows and rings, nothing more.
    #[test]
    fn layers_keep_their_own_head_shapes() {
        let layers = [
            kv_heads(2, 32, 32),
            kv_heads(1, 64, 64),
            kv_heads(2, 32, 32),
        ];
        let (n_ctx, n_seq) = (64, 2);
        for (type_k, type_v) in [(KvType::F16, KvType::F16), (KvType::Q8_0, KvType::Q4_0)] {
            let shape = KvShape {
                layers: layers.to_vec(),
                n_ctx,
                n_seq,
                type_k,
                type_v,
            };
            let mut kv = KvCache::new(&shape).unwrap();
            assert_eq!(kv.bytes(), shape.bytes().unwrap());
            // Small integers, exact in every type.
            // Cache row `r`'s keys (`sign` 1) or values (-1) of a layer.
            let row = |layer: usize, r: usize, width: usize, sign: f32| -> Vec<f32> {
                (0..width)
                    .map(|d| sign * ((layer * 3 + r + d % 5) % 7) as f32)
                    .collect()
            };
            // Half a quantization step of values up to 6 (Q8_0: 6/127, Q4_0: 6/8).
            let tol = |ty: KvType| match ty {
                KvType::F16 => 0.0,
                KvType::Q8_0 => 0.03,
                KvType::Q4_0 => 0.4,
            };
            let close = |got: &[f32], want: &[f32], ty: KvType, what: &str| {
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(want) {
                    assert!((g - w).abs() <= tol(ty), "{what}: {got:?} vs {want:?}");
                }
            };
            let n = 40;
            // Both sequences: their rows and rings sit apart too.
            let places = || (0..n_seq).flat_map(|seq| (0..n).map(move |pos| (seq, pos)));
            for (layer, h) in layers.iter().enumerate() {
                for (seq, pos) in places() {
                    let r = kv.row(seq, pos);
                    let (k, v) = (
                        row(layer, r, h.k_dim(), 1.0),
                        row(layer, r, h.v_dim(), -1.0),
                    );
                    kv.store(layer, r, &k, &v);
                }
            }
            for (layer, h) in layers.iter().enumerate() {
                for (seq, pos) in places().filter(|&(_, pos)| [0, 17, 39].contains(&pos)) {
                    let r = kv.row(seq, pos);
                    let mut k = vec![0f32; h.k_dim()];
                    kv.load_keys(layer, r, &mut k);
                    close(&k, &row(layer, r, h.k_dim(), 1.0), type_k, "keys");
                    for head in 0..h.n_head_kv {
                        let mut v = vec![0f32; h.head_dim_v];
                        kv.values(layer, head).widen(r..r + 1, &mut v);
                        let want = row(layer, r, h.v_dim(), -1.0);
                        let want = &want[head * h.head_dim_v..][..h.head_dim_v];
                        close(&v, want, type_v, "values");
                    }
                    // The query's own group comes from the layer's rings, in its head size.
                    let place = QueryPlace {
                        seq_row0: kv.row(seq, 0),
                        pos: n - 1,
                    };
                    let want = row(layer, r, h.k_dim(), 1.0);
                    for head in 0..h.n_head_kv {
                        let mut ring_k = vec![0f32; h.head_dim_k];
                        kv.keys_for(layer, head, place).widen(r..r + 1, &mut ring_k);
                        let want = &want[head * h.head_dim_k..][..h.head_dim_k];
                        if pos >= group_start(n - 1) {
                            // Exact: f16 holds these integers.
                            assert_eq!(ring_k, want, "layer {layer} head {head} ring");
                        } else {
                            close(&ring_k, want, type_k, "older keys");
                        }
                    }
                }
            }
            // Saved runs: every head's rows of keys and values, and the last group's f16 keys.
            let saved: usize = kv.seq_bytes(1, n).map(<[u8]>::len).sum();
            let per_position: usize = (layers.iter())
                .map(|h| {
                    h.n_head_kv * (type_k.row_bytes(h.head_dim_k) + type_v.row_bytes(h.head_dim_v))
                })
                .sum();
            let recent = match type_k {
                KvType::F16 => 0,
                _ => (n - group_start(n)) * layers.iter().map(|h| h.k_dim() * 2).sum::<usize>(),
            };
            assert_eq!(saved, n * per_position + recent, "{type_k}/{type_v}");
            let [n_layer, heads, width_k, width_v, ..] = kv.layout();
            assert_eq!([n_layer, heads, width_k, width_v], [3, 5, 192, 192]);
        }
    }

    #[test]
    fn quantized_types_need_whole_blocks_per_head() {
        let mut s = shape(1, 8, 1, KvType::Q8_0);
        s.layers[0].head_dim_k = 48;
        let e = KvCache::new(&s)
            .err()
            .expect("48-value heads in blocks of 32");
        assert!(e.to_string().contains("48"), "{e}");
        s.type_k = KvType::F16;
        assert!(KvCache::new(&s).is_ok());
    }

    /// A long context costs memory for the positions written, not for `n_ctx`: 1 GiB reserved,
    /// a few rows written.
    #[cfg(target_os = "linux")]
    #[test]
    fn memory_follows_the_positions_used() {
        let (n_layer, n_ctx, dim) = (8, 32768, 1024);
        let mut kv = KvCache::new(&KvShape {
            layers: vec![kv_heads(8, dim / 8, dim / 8); n_layer],
            n_ctx,
            n_seq: 1,
            type_k: KvType::F16,
            type_v: KvType::F16,
        })
        .unwrap();
        assert_eq!(kv.mem.len(), 1 << 30);
        assert!(
            resident_bytes(&kv) < 1 << 20,
            "fresh cache resident: {}",
            resident_bytes(&kv)
        );
        let row = vec![1.0f32; dim];
        for layer in 0..n_layer {
            for pos in 0..16 {
                kv.store(layer, pos, &row, &row);
            }
        }
        // 16 rows x 2 KiB x 16 arrays = 512 KiB written, in 8 heads' runs each; transparent
        // huge pages may round each of the 256 touched spots up to 2 MiB.
        let resident = resident_bytes(&kv);
        assert!(resident < 600 << 20, "{resident} bytes resident");
        assert_eq!(kv.keys(n_layer - 1, 7).f16_rows(0..1)[0].to_f32(), 1.0);
    }
}
