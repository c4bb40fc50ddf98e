//! Per-context key/value cache, stored as f16 (half the memory of f32, what llama.cpp uses).
//! A context holding several sequences gives each its own region of `n_ctx` positions, so a
//! sequence never sees another's keys and can be truncated without moving the others.

use half::f16;

use super::error::ModelError;

/// Keys and values of every layer for `n_seq` sequences of positions `0..n_ctx`, row-major:
/// `k[layer][(seq * n_ctx + pos) * k_dim + kv_head * head_dim_k + d]`.
pub struct KvCache {
    /// Positions per sequence.
    pub n_ctx: usize,
    k_dim: usize,
    v_dim: usize,
    k: Vec<Vec<f16>>,
    v: Vec<Vec<f16>>,
}

impl KvCache {
    /// Allocates the cache; a failed allocation is an error, not an abort (a host asking for a
    /// long context on a small machine gets OUT_OF_MEMORY back).
    pub fn new(
        n_layer: usize,
        n_ctx: usize,
        n_seq: usize,
        k_dim: usize,
        v_dim: usize,
    ) -> Result<KvCache, ModelError> {
        let rows = n_ctx.checked_mul(n_seq).ok_or_else(|| {
            ModelError::OutOfMemory(format!("n_ctx {n_ctx} x n_seq {n_seq} overflows"))
        })?;
        let zeros = |len: usize| -> Result<Vec<f16>, ModelError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|_| {
                ModelError::OutOfMemory(format!(
                    "cannot allocate the KV cache ({} MiB per layer) for n_ctx {n_ctx} x {n_seq} sequences",
                    (len * 2) >> 20
                ))
            })?;
            v.resize(len, f16::ZERO);
            Ok(v)
        };
        Ok(KvCache {
            n_ctx,
            k_dim,
            v_dim,
            k: (0..n_layer)
                .map(|_| zeros(rows * k_dim))
                .collect::<Result<_, _>>()?,
            v: (0..n_layer)
                .map(|_| zeros(rows * v_dim))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Row of the cache holding `pos` of sequence `seq`.
    pub fn row(&self, seq: usize, pos: usize) -> usize {
        seq * self.n_ctx + pos
    }

    /// Stores one token's key and value rows for a layer at cache row `row`.
    pub fn store(&mut self, layer: usize, row: usize, k_row: &[f32], v_row: &[f32]) {
        use half::slice::HalfFloatSliceExt;
        let (kd, vd) = (self.k_dim, self.v_dim);
        self.k[layer][row * kd..(row + 1) * kd].convert_from_f32_slice(k_row);
        self.v[layer][row * vd..(row + 1) * vd].convert_from_f32_slice(v_row);
    }

    pub fn keys(&self, layer: usize) -> &[f16] {
        &self.k[layer]
    }

    pub fn values(&self, layer: usize) -> &[f16] {
        &self.v[layer]
    }
}
