//! Weight tensors located in the mapped file, checked for name, shape and type at load time.
//!
//! Matrices stay in their quantized blocks inside the mapping; only the small norm vectors and
//! biases are copied out as f32.

use super::arch::Arch;
use super::error::ModelError;
use super::hparams::HParams;
use super::load::release_pages;
use super::repack_cache::{RepackCache, Wanted};
use crate::gguf::{GgufFile, TensorInfo};
use std::sync::Arc;

use crate::kernels::{
    self, KernelError, MatmulPlan, PackedWeights, QuantizedActivations, WeightMatrix,
};
use crate::quant::{dequant::dequantize_row, GgmlType};

/// A matrix `W[rows][k]` used as `y = W x`, referenced by its byte range in the file.
#[derive(Clone, Debug)]
pub struct Linear {
    pub name: String,
    pub ty: GgmlType,
    /// Output features (ggml `ne[1]`).
    pub rows: usize,
    /// Input features (ggml `ne[0]`).
    pub k: usize,
    start: usize,
    len: usize,
    /// How it is multiplied: in place, or repacked at load into 8-row groups (the types
    /// [`kernels::repacks`] names), the repacked copy used instead of the file bytes.
    pub plan: MatmulPlan,
}

impl Linear {
    pub fn matrix<'a>(&self, gguf: &'a GgufFile) -> WeightMatrix<'a> {
        WeightMatrix {
            ty: self.ty,
            rows: self.rows,
            k: self.k,
            data: &gguf.file_bytes()[self.start..self.start + self.len],
        }
    }

    /// `out = self · act` by the plan.
    pub fn matmul(
        &self,
        gguf: &GgufFile,
        act: &QuantizedActivations,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        self.plan.matmul(self.matrix(gguf).data, act, out)
    }

    /// The repacked copy, if the plan has one.
    pub fn packed(&self) -> Option<&Arc<dyn PackedWeights>> {
        self.plan.packed()
    }

    /// Takes the loader's plan: repacked into 8-row groups where the type has a layout, the
    /// file pages it came from released (every later read goes to the repacked copy).
    /// `on_chunk` is told the source bytes of each finished chunk (from the repacking
    /// threads). Whether it was repacked.
    fn repack(&mut self, gguf: &GgufFile, on_chunk: &(dyn Fn(usize) + Sync)) -> bool {
        let w = self.matrix(gguf);
        let done = |bytes: &[u8]| {
            release_pages(bytes);
            on_chunk(bytes.len());
        };
        match MatmulPlan::for_matrix(kernels::backend(), &w, &done) {
            Ok(plan) if plan.packed().is_some() => {
                self.plan = plan;
                // The pages that straddled two chunks.
                release_pages(w.data);
                true
            }
            _ => false,
        }
    }

    /// Uses `p`, a repacked copy of this matrix (from the repack cache).
    fn use_packed(&mut self, p: Arc<dyn PackedWeights>) {
        self.plan = MatmulPlan::repacked(kernels::backend(), p);
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.len / self.rows
    }

    /// Dequantizes row `r` into `out` (length `k`); used for embedding lookups.
    pub fn dequantize_row_into(&self, gguf: &GgufFile, r: usize, out: &mut [f32]) {
        if let Some(p) = self.packed() {
            return p.dequantize_row(r, out);
        }
        let rb = self.row_bytes();
        let bytes = &gguf.file_bytes()[self.start + r * rb..self.start + (r + 1) * rb];
        dequantize_row(self.ty, bytes, out).expect("type checked at load");
    }
}

/// Tensors bigger than this report progress while they repack, not only when done.
const REPORT_WITHIN: usize = 16 << 20;

/// [`Linear::repack`] with progress: `done` bytes were repacked before this tensor. A big
/// tensor repacks on a helper thread while this one reports the chunks finished so far, so the
/// callback keeps running on the loading thread. Cancelling takes effect after the tensor.
fn repack_reporting(
    lin: &mut Linear,
    gguf: &GgufFile,
    done: usize,
    progress: super::load::RepackProgress,
) -> Result<bool, ModelError> {
    let repacked = if lin.len < REPORT_WITHIN {
        lin.repack(gguf, &|_| {})
    } else {
        repack_polling(lin, gguf, done, progress)?
    };
    if repacked {
        progress(done + lin.len)?;
    }
    Ok(repacked)
}

/// [`Linear::repack`] on a helper thread while this one reports the finished chunks.
fn repack_polling(
    lin: &mut Linear,
    gguf: &GgufFile,
    done: usize,
    progress: super::load::RepackProgress,
) -> Result<bool, ModelError> {
    let chunks = std::sync::atomic::AtomicUsize::new(0);
    let count = |n: usize| {
        chunks.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    };
    let loader = std::thread::current();
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let repacked = lin.repack(gguf, &count);
            loader.unpark(); // no waiting out the last poll interval
            repacked
        });
        let mut result = Ok(());
        while !worker.is_finished() {
            std::thread::park_timeout(std::time::Duration::from_millis(10));
            if result.is_ok() {
                result = progress(done + chunks.load(std::sync::atomic::Ordering::Relaxed));
            }
        }
        // A panic in the repack is a bug; let it surface as one.
        let repacked = worker
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        result.map(|()| repacked)
    })
}

/// One transformer block. Shapes in comments: [out, in] for matrices.
pub struct LayerWeights {
    /// [n_embd]
    pub attn_norm: Vec<f32>,
    /// [n_head*head_dim_k, n_embd]
    pub wq: Linear,
    /// [n_head_kv*head_dim_k, n_embd]
    pub wk: Linear,
    /// [n_head_kv*head_dim_v, n_embd]
    pub wv: Linear,
    /// [n_embd, n_head*head_dim_v]
    pub wo: Linear,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub bo: Option<Vec<f32>>,
    /// [head_dim_k] (Gemma 3)
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// [n_embd] (Gemma 3)
    pub post_attn_norm: Option<Vec<f32>>,
    /// [n_embd]
    pub ffn_norm: Vec<f32>,
    /// [n_ff, n_embd]
    pub ffn_gate: Linear,
    /// [n_ff, n_embd]
    pub ffn_up: Linear,
    /// [n_embd, n_ff]
    pub ffn_down: Linear,
    /// [n_embd] (Gemma 3)
    pub post_ffn_norm: Option<Vec<f32>>,
}

impl LayerWeights {
    /// The layer's matrices, in load order.
    pub fn matrices(&self) -> [&Linear; 7] {
        [
            &self.wq,
            &self.wk,
            &self.wv,
            &self.wo,
            &self.ffn_gate,
            &self.ffn_up,
            &self.ffn_down,
        ]
    }

    fn matrices_mut(&mut self) -> [&mut Linear; 7] {
        [
            &mut self.wq,
            &mut self.wk,
            &mut self.wv,
            &mut self.wo,
            &mut self.ffn_gate,
            &mut self.ffn_up,
            &mut self.ffn_down,
        ]
    }
}

pub struct Weights {
    /// [n_vocab, n_embd], looked up row by row.
    pub token_embd: Linear,
    pub layers: Vec<LayerWeights>,
    /// [n_embd]
    pub output_norm: Vec<f32>,
    /// [n_vocab, n_embd]; the token embedding when the model ties them.
    pub output: Linear,
    /// Per-dimension RoPE frequency divisors (Llama 3.1 style), [rope_dims / 2].
    pub rope_freqs: Option<Vec<f32>>,
}

struct Loader<'a> {
    gguf: &'a GgufFile,
}

impl Loader<'_> {
    fn find(&self, name: &str) -> Option<&TensorInfo> {
        self.gguf.tensor(name)
    }

    fn check_shape(&self, t: &TensorInfo, expected: &[u64]) -> Result<(), ModelError> {
        if t.dims != expected {
            return Err(ModelError::BadTensorShape {
                tensor: t.name.clone(),
                expected: expected.to_vec(),
                found: t.dims.clone(),
            });
        }
        Ok(())
    }

    fn linear_opt(&self, name: &str, k: usize, rows: usize) -> Result<Option<Linear>, ModelError> {
        let Some(t) = self.find(name) else {
            return Ok(None);
        };
        self.check_shape(t, &[k as u64, rows as u64])?;
        if !kernels::supports(t.ggml_type) {
            return Err(ModelError::UnsupportedTensorType {
                tensor: name.into(),
                ty: t.ggml_type,
            });
        }
        let matrix = WeightMatrix {
            ty: t.ggml_type,
            rows,
            k,
            data: self.gguf.tensor_data(t),
        };
        let plan = MatmulPlan::in_place(kernels::backend(), &matrix).map_err(|e| {
            ModelError::BadTensorShape {
                tensor: format!("{name}: {e}"),
                expected: vec![k as u64, rows as u64],
                found: t.dims.clone(),
            }
        })?;
        Ok(Some(Linear {
            name: name.to_owned(),
            ty: t.ggml_type,
            rows,
            k,
            start: (self.gguf.data_offset() + t.offset) as usize,
            len: matrix.data.len(),
            plan,
        }))
    }

    fn linear(&self, name: &str, k: usize, rows: usize) -> Result<Linear, ModelError> {
        self.linear_opt(name, k, rows)?
            .ok_or_else(|| ModelError::MissingTensor(name.into()))
    }

    fn vector_opt(&self, name: &str, n: usize) -> Result<Option<Vec<f32>>, ModelError> {
        let Some(t) = self.find(name) else {
            return Ok(None);
        };
        self.check_shape(t, &[n as u64])?;
        let mut out = vec![0.0; n];
        dequantize_row(t.ggml_type, self.gguf.tensor_data(t), &mut out).map_err(|_| {
            ModelError::UnsupportedTensorType {
                tensor: name.into(),
                ty: t.ggml_type,
            }
        })?;
        Ok(Some(out))
    }

    fn vector(&self, name: &str, n: usize) -> Result<Vec<f32>, ModelError> {
        self.vector_opt(name, n)?
            .ok_or_else(|| ModelError::MissingTensor(name.into()))
    }
}

impl Weights {
    /// Every matrix the forward pass multiplies by: the layers' in order, then the output
    /// head.
    pub fn matrices(&self) -> Vec<&Linear> {
        let layers = self.layers.iter().flat_map(LayerWeights::matrices);
        layers.chain([&self.output]).collect()
    }

    /// Locates and checks every tensor and repacks those with an interleaved layout, telling
    /// `progress` the bytes repacked after each tensor. With a `cache`, the repacked matrices
    /// come from it when it holds them (then the second value is true), and are written to it
    /// otherwise.
    pub fn load(
        gguf: &GgufFile,
        arch: Arch,
        hp: &HParams,
        cache: Option<&RepackCache>,
        progress: super::load::RepackProgress,
    ) -> Result<(Weights, bool), ModelError> {
        let l = Loader { gguf };
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let token_embd = l.linear("token_embd.weight", e, v)?;
        if !crate::quant::dequant::is_supported(token_embd.ty) {
            return Err(ModelError::UnsupportedTensorType {
                tensor: token_embd.name,
                ty: token_embd.ty,
            });
        }
        let mut layers = Vec::with_capacity(hp.n_layer);
        for il in 0..hp.n_layer {
            let n = |s: &str| format!("blk.{il}.{s}");
            let gemma = arch.has_qk_norm_and_post_norms();
            let req_if =
                |cond: bool, name: &str, len: usize| -> Result<Option<Vec<f32>>, ModelError> {
                    match l.vector_opt(&n(name), len)? {
                        None if cond => Err(ModelError::MissingTensor(n(name))),
                        other => Ok(other),
                    }
                };
            layers.push(LayerWeights {
                attn_norm: l.vector(&n("attn_norm.weight"), e)?,
                wq: l.linear(&n("attn_q.weight"), e, hp.q_dim())?,
                wk: l.linear(&n("attn_k.weight"), e, hp.k_dim())?,
                wv: l.linear(&n("attn_v.weight"), e, hp.v_dim())?,
                wo: l.linear(&n("attn_output.weight"), hp.n_head * hp.head_dim_v, e)?,
                bq: req_if(arch == Arch::Qwen2, "attn_q.bias", hp.q_dim())?,
                bk: req_if(arch == Arch::Qwen2, "attn_k.bias", hp.k_dim())?,
                bv: req_if(arch == Arch::Qwen2, "attn_v.bias", hp.v_dim())?,
                bo: l.vector_opt(&n("attn_output.bias"), e)?,
                q_norm: req_if(gemma, "attn_q_norm.weight", hp.head_dim_k)?,
                k_norm: req_if(gemma, "attn_k_norm.weight", hp.head_dim_k)?,
                post_attn_norm: req_if(gemma, "post_attention_norm.weight", e)?,
                ffn_norm: l.vector(&n("ffn_norm.weight"), e)?,
                ffn_gate: l.linear(&n("ffn_gate.weight"), e, hp.n_ff)?,
                ffn_up: l.linear(&n("ffn_up.weight"), e, hp.n_ff)?,
                ffn_down: l.linear(&n("ffn_down.weight"), hp.n_ff, e)?,
                post_ffn_norm: req_if(gemma, "post_ffw_norm.weight", e)?,
            });
        }
        let mut output = match l.linear_opt("output.weight", e, v)? {
            Some(o) => o,
            None => token_embd.clone(),
        };
        let tied = output.start == token_embd.start;
        // One tensor at a time (each repacks in parallel chunks); progress and cancellation
        // go through the loading thread between tensors. A tied output head is the token
        // embedding: repacked once, shared, and looked up from the repacked copy (an embedding
        // that is only looked up stays in the file). It goes last: by then the layers' file
        // pages (some faulted in beside the prefaulted tensors) are released, so the biggest
        // matrix never has both copies resident with them.
        let mut token_embd = token_embd;
        let mut targets: Vec<&mut Linear> = layers
            .iter_mut()
            .flat_map(LayerWeights::matrices_mut)
            .collect();
        targets.push(if tied { &mut token_embd } else { &mut output });
        targets.retain(|l| MatmulPlan::would_repack(l.ty, l.k));
        let names: Vec<String> = targets.iter().map(|l| l.name.clone()).collect();
        let wanted: Vec<Wanted> = targets
            .iter()
            .zip(&names)
            .map(|(l, name)| Wanted {
                name,
                ty: l.ty,
                rows: l.rows,
                k: l.k,
            })
            .collect();
        // Nothing to repack (an architecture without interleaved kernels): no cache file.
        let cache = cache.filter(|_| !wanted.is_empty());
        if cache.is_some() {
            // Prefaulting the in-place tensors maps whole page-cache folios around them, most
            // of them these tensors' file pages (gemma: 67 MB). Dropped before the cached copy
            // is mapped, so the peak holds one copy; a miss re-reads them from the page cache.
            for lin in &targets {
                release_pages(lin.matrix(gguf).data);
            }
        }
        let cached = cache.and_then(|c| c.load(&wanted));
        let from_cache = cached.is_some();
        if let Some(mats) = cached {
            for (lin, m) in targets.iter_mut().zip(mats) {
                lin.use_packed(m);
            }
            progress(targets.iter().map(|l| l.len).sum())?;
        } else {
            let mut done = 0;
            for lin in targets.iter_mut() {
                if repack_reporting(lin, gguf, done, progress)? {
                    done += lin.len;
                }
            }
            if let Some(c) = cache {
                let mats: Vec<&dyn PackedWeights> = targets
                    .iter()
                    .filter_map(|l| l.packed().map(|p| &**p))
                    .collect();
                if mats.len() == wanted.len() {
                    // A cache that cannot be written only costs the next load its speed.
                    let _ = c.store(&wanted, &mats);
                }
            }
        }
        drop(targets);
        if tied {
            output = token_embd.clone();
        }
        let weights = Weights {
            output_norm: l.vector("output_norm.weight", e)?,
            output,
            token_embd,
            layers,
            rope_freqs: l.vector_opt("rope_freqs.weight", hp.rope_dims / 2)?,
        };
        Ok((weights, from_cache))
    }
}
