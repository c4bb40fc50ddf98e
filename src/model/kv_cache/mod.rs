//! Per-context key/value cache, in the type chosen per context for keys and for values (f16 by
//! default, as llama.cpp; Q8_0 or Q4_0 for long contexts in less memory). A context holding
//! several sequences gives each its own region of `n_ctx` positions, so a sequence never sees
//! another's keys and can be truncated without moving the others.
//!
//! Head-major: each layer's keys of one KV head are one run of rows, so attention streams a
//! head's rows from contiguous memory.

mod kv_type;

pub use kv_type::KvType;

use half::f16;
use memmap2::MmapMut;

use super::error::ModelError;
use crate::quant::blocks::cast_blocks;

/// The shape of one side (keys or values) of the cache.
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

/// Keys and values of every layer for `n_seq` sequences of positions `0..n_ctx`: cache row
/// `seq * n_ctx + pos`, stored per (layer, KV head) as `rows` consecutive rows.
pub struct KvCache {
    /// Positions per sequence.
    pub n_ctx: usize,
    /// Cache rows per layer: `n_seq * n_ctx`.
    rows: usize,
    n_layer: usize,
    n_head_kv: usize,
    k: Side,
    v: Side,
    /// Every layer's keys, then every layer's values. Anonymous memory is zero and takes no
    /// RAM until written, so a context costs memory for the positions it has used, not for
    /// all of `n_ctx` (a 32k-token context holding a short chat stays small).
    mem: MmapMut,
}

/// The shape of a cache: per layer, `n_head_kv` heads of keys and values.
#[derive(Clone, Copy, Debug)]
pub struct KvShape {
    pub n_layer: usize,
    pub n_ctx: usize,
    pub n_seq: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub type_k: KvType,
    pub type_v: KvType,
}

impl KvShape {
    /// Bytes a cache of this shape takes with every position written (`None`: past the
    /// address space).
    pub fn bytes(&self) -> Option<usize> {
        let row = self.type_k.row_bytes(self.head_dim_k) + self.type_v.row_bytes(self.head_dim_v);
        self.n_ctx
            .checked_mul(self.n_seq)?
            .checked_mul(row)?
            .checked_mul(self.n_head_kv)?
            .checked_mul(self.n_layer)
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
        for (ty, dim, which) in [
            (s.type_k, s.head_dim_k, "keys"),
            (s.type_v, s.head_dim_v, "values"),
        ] {
            if dim % ty.block_len() != 0 {
                return Err(ModelError::InvalidArgument(format!(
                    "a {ty} KV cache stores {which} in blocks of {}, and this model's heads have \
                     {dim} values: use f16",
                    ty.block_len()
                )));
            }
        }
        let too_big = || {
            ModelError::OutOfMemory(format!(
                "the KV cache for n_ctx {} x {} sequences overflows the address space",
                s.n_ctx, s.n_seq
            ))
        };
        // llama.cpp's choice of blocks (and so its rounding): keys in the largest power of two
        // dividing the head, values in 64s.
        let k_block = 1 << s.head_dim_k.trailing_zeros();
        let k = Side::new(s.type_k, s.head_dim_k, Some(k_block));
        let v = Side::new(s.type_v, s.head_dim_v, Some(64));
        let rows = s.n_ctx.checked_mul(s.n_seq).ok_or_else(too_big)?;
        let bytes = s.bytes().ok_or_else(too_big)?;
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
            n_layer: s.n_layer,
            n_head_kv: s.n_head_kv,
            k,
            v,
            mem,
        })
    }

    /// Bytes the whole cache takes once every position is written.
    pub fn bytes(&self) -> usize {
        self.mem.len()
    }

    /// Quantized keys are stored rotated by an orthonormal Walsh-Hadamard transform of this many
    /// values (a head size that is a multiple of 64), which spreads outlier channels (large in
    /// Qwen's keys) over the block before it is quantized; the queries are rotated alike, so
    /// their dot products are the same. llama.cpp does the same; without it a Q8_0 cache of
    /// Qwen2.5-0.5B loses 6.6% perplexity instead of 3.3% (0.8% with the keys also centered,
    /// 0.2% also balanced: see `context::centering` and `context::balance`).
    pub fn rotation_k(&self) -> Option<usize> {
        self.k.rotation
    }

    /// As [`KvCache::rotation_k`] for values, in blocks of 64: the attention output comes out
    /// rotated too, and is rotated back (the transform is its own inverse).
    pub fn rotation_v(&self) -> Option<usize> {
        self.v.rotation
    }

    pub fn type_k(&self) -> KvType {
        self.k.ty
    }

    pub fn type_v(&self) -> KvType {
        self.v.ty
    }

    /// Byte range of a (layer, head)'s keys (`values`: false) or values.
    fn span(&self, layer: usize, head: usize, values: bool) -> std::ops::Range<usize> {
        assert!(
            layer < self.n_layer && head < self.n_head_kv,
            "layer {layer} head {head} out of range"
        );
        let heads = (self.n_layer * self.n_head_kv) * self.rows;
        let (base, side) = if values {
            (heads * self.k.row_bytes, self.v)
        } else {
            (0, self.k)
        };
        let start = base + (layer * self.n_head_kv + head) * self.rows * side.row_bytes;
        start..start + self.rows * side.row_bytes
    }

    /// Row of the cache holding `pos` of sequence `seq`.
    pub fn row(&self, seq: usize, pos: usize) -> usize {
        seq * self.n_ctx + pos
    }

    /// Stores one token's key and value rows (every KV head's, [n_head_kv * head_dim]) for a
    /// layer at cache row `row`.
    pub fn store(&mut self, layer: usize, row: usize, k_row: &[f32], v_row: &[f32]) {
        assert!(row < self.rows, "cache row {row} out of range");
        for (side, x, values) in [(self.k, k_row, false), (self.v, v_row, true)] {
            assert_eq!(x.len(), self.n_head_kv * side.head_dim, "KV row length");
            for (h, head) in x.chunks_exact(side.head_dim).enumerate() {
                let span = self.span(layer, h, values);
                let at = span.start + row * side.row_bytes;
                side.ty.encode(head, &mut self.mem[at..at + side.row_bytes]);
            }
        }
    }

    /// One token's keys of a layer (every KV head's, [n_head_kv * head_dim_k]) from cache row
    /// `row`, widened to f32.
    pub fn load_keys(&self, layer: usize, row: usize, out: &mut [f32]) {
        for (h, head) in out.chunks_exact_mut(self.k.head_dim).enumerate() {
            self.keys(layer, h).widen(row..row + 1, head);
        }
    }

    /// Overwrites one token's keys of a layer at cache row `row` (as [`KvCache::store`] does).
    pub fn store_keys(&mut self, layer: usize, row: usize, k_row: &[f32]) {
        assert_eq!(
            k_row.len(),
            self.n_head_kv * self.k.head_dim,
            "key row length"
        );
        for (h, head) in k_row.chunks_exact(self.k.head_dim).enumerate() {
            let at = self.span(layer, h, false).start + row * self.k.row_bytes;
            self.k
                .ty
                .encode(head, &mut self.mem[at..at + self.k.row_bytes]);
        }
    }

    /// Copies a layer's keys and values of cache row `src` to row `dst`, as stored.
    pub fn copy_row(&mut self, layer: usize, src: usize, dst: usize) {
        assert!(src < self.rows && dst < self.rows, "cache row out of range");
        for (side, values) in [(self.k, false), (self.v, true)] {
            for h in 0..self.n_head_kv {
                let base = self.span(layer, h, values).start;
                let n = side.row_bytes;
                self.mem
                    .copy_within(base + src * n..base + (src + 1) * n, base + dst * n);
            }
        }
    }

    /// Where sequence `seq`'s first `n` positions are stored: one byte range per (layer, KV
    /// head) of keys, then the same for values (what saved state holds, in this order).
    fn seq_runs(&self, seq: usize, n: usize) -> Vec<std::ops::Range<usize>> {
        assert!(n <= self.n_ctx, "{n} positions of {}", self.n_ctx);
        let row0 = self.row(seq, 0);
        let mut runs = Vec::with_capacity(2 * self.n_layer * self.n_head_kv);
        for (side, values) in [(self.k, false), (self.v, true)] {
            for layer in 0..self.n_layer {
                for h in 0..self.n_head_kv {
                    let start = self.span(layer, h, values).start + row0 * side.row_bytes;
                    runs.push(start..start + n * side.row_bytes);
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
        Ok(())
    }

    /// What a saved state must match to be loaded into this cache: layers, KV heads, head
    /// sizes, types and Hadamard blocks.
    pub fn layout(&self) -> [u32; 8] {
        let rot = |r: Option<usize>| r.map_or(0, |n| n as u32);
        [
            self.n_layer as u32,
            self.n_head_kv as u32,
            self.k.head_dim as u32,
            self.v.head_dim as u32,
            self.k.ty as u32,
            self.v.ty as u32,
            rot(self.k.rotation),
            rot(self.v.rotation),
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
        let side = if values { self.v } else { self.k };
        HeadRows {
            ty: side.ty,
            row_bytes: side.row_bytes,
            data: &self.mem[self.span(layer, head, values)],
        }
    }
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
            n_layer,
            n_ctx,
            n_seq,
            n_head_kv: 2,
            head_dim_k: 64,
            head_dim_v: 32,
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

    #[test]
    fn quantized_types_need_whole_blocks_per_head() {
        let mut s = shape(1, 8, 1, KvType::Q8_0);
        s.head_dim_k = 48;
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
            n_layer,
            n_ctx,
            n_seq: 1,
            n_head_kv: 8,
            head_dim_k: dim / 8,
            head_dim_v: dim / 8,
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
