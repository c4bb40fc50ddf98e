//! Per-context key/value cache, stored as f16 (half the memory of f32, what llama.cpp uses).

use half::f16;

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
    pub fn new(n_layer: usize, n_ctx: usize, k_dim: usize, v_dim: usize) -> KvCache {
        KvCache {
            n_ctx,
            k_dim,
            v_dim,
            k: (0..n_layer)
                .map(|_| vec![f16::ZERO; n_ctx * k_dim])
                .collect(),
            v: (0..n_layer)
                .map(|_| vec![f16::ZERO; n_ctx * v_dim])
                .collect(),
        }
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
