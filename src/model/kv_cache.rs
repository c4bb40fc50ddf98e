//! Per-context key/value cache, stored as f16 (half the memory of f32, what llama.cpp uses).

use half::f16;

use super::error::ModelError;

/// Keys and values of every layer for positions `0..n_ctx`, position-major:
/// `k[layer][pos * k_dim + kv_head * head_dim_k + d]`.
pub struct KvCache {
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
        k_dim: usize,
        v_dim: usize,
    ) -> Result<KvCache, ModelError> {
        let zeros = |len: usize| -> Result<Vec<f16>, ModelError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|_| {
                ModelError::OutOfMemory(format!(
                    "cannot allocate the KV cache ({} MiB per layer) for n_ctx {n_ctx}",
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
                .map(|_| zeros(n_ctx * k_dim))
                .collect::<Result<_, _>>()?,
            v: (0..n_layer)
                .map(|_| zeros(n_ctx * v_dim))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Stores rows of keys and values (`n` positions starting at `pos`) for a layer.
    pub fn store(&mut self, layer: usize, pos: usize, k_rows: &[f32], v_rows: &[f32]) {
        use half::slice::HalfFloatSliceExt;
        let n = k_rows.len() / self.k_dim;
        self.k[layer][pos * self.k_dim..(pos + n) * self.k_dim].convert_from_f32_slice(k_rows);
        self.v[layer][pos * self.v_dim..(pos + n) * self.v_dim].convert_from_f32_slice(v_rows);
    }

    pub fn keys(&self, layer: usize) -> &[f16] {
        &self.k[layer]
    }

    pub fn values(&self, layer: usize) -> &[f16] {
        &self.v[layer]
    }
}
