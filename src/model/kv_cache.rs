//! Per-context key/value cache, stored as f16 (half the memory of f32, what llama.cpp uses).
//! A context holding several sequences gives each its own region of `n_ctx` positions, so a
//! sequence never sees another's keys and can be truncated without moving the others.

use half::f16;
use memmap2::MmapMut;

use super::error::ModelError;

/// Keys and values of every layer for `n_seq` sequences of positions `0..n_ctx`, row-major:
/// `k[layer][(seq * n_ctx + pos) * k_dim + kv_head * head_dim_k + d]`.
pub struct KvCache {
    /// Positions per sequence.
    pub n_ctx: usize,
    k_dim: usize,
    v_dim: usize,
    /// Cache rows per layer: `n_seq * n_ctx`.
    rows: usize,
    n_layer: usize,
    /// Every layer's keys, then every layer's values, as f16. Anonymous memory is zero and
    /// takes no RAM until written, so a context costs memory for the positions it has used,
    /// not for all of `n_ctx` (a 32k-token context holding a short chat stays small).
    mem: MmapMut,
}

impl KvCache {
    /// Reserves the cache; a failed reservation is an error, not an abort (a host asking for
    /// a long context on a small machine gets OUT_OF_MEMORY back).
    pub fn new(
        n_layer: usize,
        n_ctx: usize,
        n_seq: usize,
        k_dim: usize,
        v_dim: usize,
    ) -> Result<KvCache, ModelError> {
        let too_big = || {
            ModelError::OutOfMemory(format!(
                "the KV cache for n_ctx {n_ctx} x {n_seq} sequences overflows the address space"
            ))
        };
        let rows = n_ctx.checked_mul(n_seq).ok_or_else(too_big)?;
        let bytes = rows
            .checked_mul(k_dim + v_dim)
            .and_then(|x| x.checked_mul(n_layer))
            .and_then(|x| x.checked_mul(std::mem::size_of::<f16>()))
            .ok_or_else(too_big)?;
        let mem = MmapMut::map_anon(bytes.max(1)).map_err(|e| {
            ModelError::OutOfMemory(format!(
                "cannot reserve the KV cache ({} MiB) for n_ctx {n_ctx} x {n_seq} sequences: {e}",
                bytes >> 20
            ))
        })?;
        Ok(KvCache {
            n_ctx,
            k_dim,
            v_dim,
            rows,
            n_layer,
            mem,
        })
    }

    /// Element offsets of a layer's keys and values.
    fn offsets(&self, layer: usize) -> (usize, usize) {
        assert!(layer < self.n_layer, "layer {layer} out of range");
        let k = layer * self.rows * self.k_dim;
        let v = self.n_layer * self.rows * self.k_dim + layer * self.rows * self.v_dim;
        (k, v)
    }

    fn all(&self) -> &[f16] {
        let len = self.mem.len() / std::mem::size_of::<f16>();
        // SAFETY: the mapping is page-aligned, `len` f16 long, and every bit pattern is an f16.
        unsafe { std::slice::from_raw_parts(self.mem.as_ptr().cast::<f16>(), len) }
    }

    fn all_mut(&mut self) -> &mut [f16] {
        let len = self.mem.len() / std::mem::size_of::<f16>();
        // SAFETY: as in `all`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_mut_ptr().cast::<f16>(), len) }
    }

    /// Row of the cache holding `pos` of sequence `seq`.
    pub fn row(&self, seq: usize, pos: usize) -> usize {
        seq * self.n_ctx + pos
    }

    /// Stores one token's key and value rows for a layer at cache row `row`.
    pub fn store(&mut self, layer: usize, row: usize, k_row: &[f32], v_row: &[f32]) {
        use half::slice::HalfFloatSliceExt;
        let (kd, vd) = (self.k_dim, self.v_dim);
        assert!(row < self.rows, "cache row {row} out of range");
        let (k, v) = self.offsets(layer);
        let all = self.all_mut();
        all[k + row * kd..k + (row + 1) * kd].convert_from_f32_slice(k_row);
        all[v + row * vd..v + (row + 1) * vd].convert_from_f32_slice(v_row);
    }

    /// A layer's keys, `rows * k_dim` of them.
    pub fn keys(&self, layer: usize) -> &[f16] {
        let (k, _) = self.offsets(layer);
        &self.all()[k..k + self.rows * self.k_dim]
    }

    /// A layer's values, `rows * v_dim` of them.
    pub fn values(&self, layer: usize) -> &[f16] {
        let (_, v) = self.offsets(layer);
        &self.all()[v..v + self.rows * self.v_dim]
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

    /// Rows land in their own layer's keys and values, at the row asked for, and the rest
    /// reads as zero.
    #[test]
    fn rows_round_trip_per_layer() {
        let (n_layer, n_ctx, n_seq, kd, vd) = (3, 5, 2, 4, 6);
        let mut kv = KvCache::new(n_layer, n_ctx, n_seq, kd, vd).unwrap();
        for layer in 0..n_layer {
            for row in [0, 7, 9] {
                let k: Vec<f32> = (0..kd)
                    .map(|d| (100 * layer + 10 * row + d) as f32)
                    .collect();
                let v: Vec<f32> = k.iter().map(|x| -x).chain([0.5; 2]).collect();
                kv.store(layer, row, &k, &v);
            }
        }
        for layer in 0..n_layer {
            let (keys, values) = (kv.keys(layer), kv.values(layer));
            assert_eq!(
                (keys.len(), values.len()),
                (n_ctx * n_seq * kd, n_ctx * n_seq * vd)
            );
            for row in 0..n_ctx * n_seq {
                let stored = [0, 7, 9].contains(&row);
                for d in 0..kd {
                    let want = if stored {
                        (100 * layer + 10 * row + d) as f32
                    } else {
                        0.0
                    };
                    assert_eq!(keys[row * kd + d].to_f32(), want);
                    assert_eq!(values[row * vd + d].to_f32(), -want);
                }
                assert_eq!(
                    values[row * vd + 5].to_f32(),
                    if stored { 0.5 } else { 0.0 }
                );
            }
        }
    }

    /// A long context costs memory for the positions written, not for `n_ctx`: 1 GiB reserved,
    /// a few rows written.
    #[cfg(target_os = "linux")]
    #[test]
    fn memory_follows_the_positions_used() {
        let (n_layer, n_ctx, dim) = (8, 32768, 1024);
        let mut kv = KvCache::new(n_layer, n_ctx, 1, dim, dim).unwrap();
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
        // 16 rows x 2 KiB x 16 arrays = 512 KiB written; transparent huge pages may round
        // each of the 16 touched spots up to 2 MiB.
        let resident = resident_bytes(&kv);
        assert!(resident < 40 << 20, "{resident} bytes resident");
        assert_eq!(kv.keys(n_layer - 1)[0].to_f32(), 1.0);
    }
}
