//! A context: the KV cache of one or more sequences and the transformer forward pass over it.
//!
//! Several sequences share one forward pass ([`Context::decode`]): their tokens go through every
//! matrix multiplication together (each weight row is read once for the whole batch), and only
//! attention looks at each token's own sequence. This is what continuous batching is built on.
//!
//! The forward pass reads top to bottom like the architecture: embed, then per layer
//! norm → QKV → (QK-norm) → RoPE → attention → output projection → (post-norm) → residual,
//! norm → gate/up → GLU → down → (post-norm) → residual; final norm and the output head.

use std::sync::Arc;

use super::arch::Activation;
use super::attention::{attention, AttentionShape, QueryPlace};
use super::error::ModelError;
use super::kv_cache::KvCache;
use super::ops::{self, Rope};
use super::scratch::Scratch;
use super::weights::Linear;
use super::workers::Workers;
use super::Model;
use crate::kernels::{self, ActNeeds, ActSource, QuantizedActivations};
use crate::parallel;
use crate::tokenizer::TokenId;

/// Which logits a forward pass returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token's row: [n_vocab].
    Last,
    /// Every token's row: [n_tokens, n_vocab] (teacher forcing).
    All,
    /// The rows of the last `n` tokens: [n, n_vocab] (perplexity scores only the second half).
    Tail(usize),
}

#[derive(Clone, Debug)]
pub struct ContextParams {
    /// Positions the KV cache holds per sequence (at most the model's trained context).
    pub n_ctx: usize,
    /// Sequences the context holds, each with its own `n_ctx` positions (see [`Context::decode`]).
    pub n_seq: usize,
    /// Worker threads for this context's computations.
    pub n_threads: usize,
    /// Largest number of tokens evaluated in one forward pass; longer inputs are split.
    pub n_batch: usize,
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: 4096,
            n_seq: 1,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            n_batch: 512,
        }
    }
}

/// One token of a multi-sequence batch for [`Context::decode`]. It is appended to sequence
/// `seq` at that sequence's next position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchToken {
    pub token: TokenId,
    pub seq: usize,
    /// Whether the logits of this token are returned.
    pub logits: bool,
}

pub struct Context {
    model: Arc<Model>,
    kv: KvCache,
    /// Tokens held per sequence.
    seq_len: Vec<usize>,
    n_batch: usize,
    pool: Arc<Workers>,
    /// RoPE tables for global layers and (Gemma 3) sliding-window layers.
    rope_global: Rope,
    rope_local: Rope,
    /// Asked before every layer whether to stop the forward pass (see [`Context::set_abort`]).
    abort: Option<AbortCallback>,
    /// The forward pass's activation buffers, kept between layers and passes.
    scratch: Scratch,
}

/// Returns `true` to stop the forward pass in progress.
pub type AbortCallback = Box<dyn FnMut() -> bool + Send>;

impl Context {
    pub fn new(model: Arc<Model>, params: &ContextParams) -> Result<Context, ModelError> {
        let hp = &model.hparams;
        if params.n_ctx == 0 || params.n_ctx > hp.n_ctx_train {
            return Err(ModelError::InvalidArgument(format!(
                "n_ctx {} must be in 1..={} (the model's trained context)",
                params.n_ctx, hp.n_ctx_train
            )));
        }
        if params.n_threads == 0 || params.n_batch == 0 || params.n_seq == 0 {
            return Err(ModelError::InvalidArgument(
                "n_threads, n_batch and n_seq must be > 0".into(),
            ));
        }
        let pool = Workers::new(params.n_threads)?;
        let style = model.arch.rope_style();
        let freqs = model.weights.rope_freqs.as_deref();
        let rope_global = Rope::new(hp.rope_base, hp.rope_freq_scale, hp.rope_dims, style, freqs);
        let rope_local = Rope::new(hp.rope_base_swa, 1.0, hp.rope_dims, style, freqs);
        Ok(Context {
            kv: KvCache::new(
                hp.n_layer,
                params.n_ctx,
                params.n_seq,
                hp.k_dim(),
                hp.v_dim(),
            )?,
            model,
            seq_len: vec![0; params.n_seq],
            n_batch: params.n_batch,
            pool: Arc::new(pool),
            rope_global,
            rope_local,
            abort: None,
            scratch: Scratch::default(),
        })
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// Tokens held in the cache (of sequence 0, the one [`Context::eval`] uses).
    pub fn n_past(&self) -> usize {
        self.seq_len[0]
    }

    /// Positions per sequence.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx
    }

    /// Most tokens in one forward pass.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    pub fn n_seq(&self) -> usize {
        self.seq_len.len()
    }

    /// Tokens held by sequence `seq` (panics if `seq >= n_seq`).
    pub fn seq_len(&self, seq: usize) -> usize {
        self.seq_len[seq]
    }

    /// Forgets every position of sequence `seq` from `n` on (panics if `seq >= n_seq`).
    pub fn truncate_seq(&mut self, seq: usize, n: usize) {
        self.seq_len[seq] = self.seq_len[seq].min(n);
    }

    /// Installs (or with `None` removes) a callback asked before each layer of every forward
    /// pass; when it returns `true`, `eval` stops with [`ModelError::Cancelled`] and the context
    /// keeps what it held before that call.
    pub fn set_abort(&mut self, abort: Option<AbortCallback>) {
        self.abort = abort;
    }

    /// Forgets every position of sequence 0 from `n` on (keeps the first `n` tokens).
    pub fn truncate(&mut self, n: usize) {
        self.truncate_seq(0, n);
    }

    /// Evaluates `tokens` at the next positions of sequence 0 and returns their logits. On error
    /// nothing changes (the cache keeps its previous contents and length).
    pub fn eval(&mut self, tokens: &[TokenId], which: Logits) -> Result<Vec<f32>, ModelError> {
        // Rows wanted counted from the end of `tokens`; batches before them skip the output head.
        let n_tail = match which {
            Logits::Last => 1,
            Logits::All => tokens.len(),
            Logits::Tail(n) => n.min(tokens.len()),
        };
        let first_out = tokens.len() - n_tail.min(tokens.len());
        let batch: Vec<BatchToken> = tokens
            .iter()
            .enumerate()
            .map(|(i, &token)| BatchToken {
                token,
                seq: 0,
                logits: i >= first_out,
            })
            .collect();
        self.decode(&batch)
    }

    /// Evaluates a batch of tokens from any of the context's sequences in one forward pass
    /// (split into passes of at most `n_batch` tokens) and returns the logits of the tokens
    /// marked `logits`, in batch order: [n_marked, n_vocab]. Each token is appended to its
    /// sequence; tokens of one sequence keep their batch order. On error nothing changes.
    pub fn decode(&mut self, batch: &[BatchToken]) -> Result<Vec<f32>, ModelError> {
        self.validate(batch)?;
        let before = self.seq_len.clone();
        let mut logits = Vec::new();
        for chunk in batch.chunks(self.n_batch) {
            let places: Vec<QueryPlace> = chunk
                .iter()
                .map(|b| {
                    let pos = self.seq_len[b.seq];
                    self.seq_len[b.seq] += 1;
                    QueryPlace {
                        seq_row0: self.kv.row(b.seq, 0),
                        pos,
                    }
                })
                .collect();
            let pool = Arc::clone(&self.pool);
            match pool.install(|| self.forward(chunk, &places)) {
                // One pass (the usual case): its buffer is the result, not copied.
                Ok(out) if logits.is_empty() => logits = out,
                Ok(out) => logits.extend_from_slice(&out),
                Err(e) => {
                    self.seq_len = before;
                    return Err(e);
                }
            }
        }
        Ok(logits)
    }

    fn validate(&self, batch: &[BatchToken]) -> Result<(), ModelError> {
        let n_vocab = self.model.hparams.n_vocab;
        if batch.is_empty() {
            return Err(ModelError::InvalidArgument("no tokens to evaluate".into()));
        }
        let mut added = vec![0usize; self.seq_len.len()];
        for b in batch {
            if b.token as usize >= n_vocab {
                return Err(ModelError::InvalidToken {
                    token: b.token,
                    n_vocab,
                });
            }
            let Some(n) = added.get_mut(b.seq) else {
                return Err(ModelError::InvalidArgument(format!(
                    "sequence {} is not in 0..{}",
                    b.seq,
                    self.seq_len.len()
                )));
            };
            *n += 1;
        }
        for (seq, &n) in added.iter().enumerate() {
            if self.seq_len[seq] + n > self.kv.n_ctx {
                return Err(ModelError::ContextFull {
                    n_ctx: self.kv.n_ctx,
                    n_past: self.seq_len[seq],
                    requested: n,
                });
            }
        }
        Ok(())
    }

    /// One pass through the network; `places[t]` is where token `t` sits in the cache. Returns
    /// the logits of the tokens marked `logits`.
    fn forward(
        &mut self,
        batch: &[BatchToken],
        places: &[QueryPlace],
    ) -> Result<Vec<f32>, ModelError> {
        let model = Arc::clone(&self.model);
        let (hp, w, gguf) = (&model.hparams, &model.weights, &model.gguf);
        let n = batch.len();
        let e = hp.n_embd;
        let scratch = &mut self.scratch;

        // x: [n, n_embd] residual stream.
        let mut x = scratch.take(n * e);
        for (t, b) in batch.iter().enumerate() {
            w.token_embd
                .dequantize_row_into(gguf, b.token as usize, &mut x[t * e..(t + 1) * e]);
        }
        if model.arch.scales_embeddings() {
            let s = (e as f32).sqrt();
            x.iter_mut().for_each(|v| *v *= s);
        }

        for (il, lw) in w.layers.iter().enumerate() {
            if let Some(abort) = &mut self.abort {
                if abort() {
                    return Err(ModelError::Cancelled);
                }
            }
            // --- attention block ---
            // Per-token element-wise passes run in parallel row chunks for prompts
            // (`parallel::for_each_row`). The norm feeds the quantizer chunk by chunk
            // (`normed`): no normalized copy of `x` is written.
            let [mut q, mut k, mut v] = {
                let inv = row_inv_rms(&mut x, e, hp.rms_eps);
                let norm = normed(&x, e, &inv, &lw.attn_norm);
                let qkv = [&lw.wq, &lw.wk, &lw.wv];
                project(gguf, ActSource::Computed(&norm), n, e, qkv, scratch)?
            };
            for (rows, bias) in [(&mut q, &lw.bq), (&mut k, &lw.bk), (&mut v, &lw.bv)] {
                if let Some(b) = bias {
                    ops::add_bias(rows, b);
                }
            }
            let sliding = hp.is_sliding(il);
            let rope = if sliding {
                &self.rope_local
            } else {
                &self.rope_global
            };
            // Gemma scales the queries before attention (llama.cpp's graph does too, and the f16
            // rounding of small query values in its attention kernel depends on it).
            let q_scale = model
                .arch
                .scales_queries_before_attention()
                .then_some(hp.attn_scale);
            parallel::for_each_row(&mut q, hp.q_dim(), &mut k, hp.k_dim(), |t, q_t, k_t| {
                if let (Some(qn), Some(kn)) = (&lw.q_norm, &lw.k_norm) {
                    ops::rms_norm_rows_inplace(q_t, qn, hp.rms_eps);
                    ops::rms_norm_rows_inplace(k_t, kn, hp.rms_eps);
                }
                rope.apply(&mut [&mut *q_t, &mut *k_t], hp.head_dim_k, places[t].pos);
                if let Some(s) = q_scale {
                    q_t.iter_mut().for_each(|v| *v *= s);
                }
            });
            let scale = if q_scale.is_some() {
                1.0
            } else {
                hp.attn_scale
            };
            let (kd, vd) = (hp.k_dim(), hp.v_dim());
            for (t, place) in places.iter().enumerate() {
                let row = place.seq_row0 + place.pos;
                self.kv
                    .store(il, row, &k[t * kd..(t + 1) * kd], &v[t * vd..(t + 1) * vd]);
            }
            let shape = AttentionShape {
                n_head: hp.n_head,
                n_head_kv: hp.n_head_kv,
                head_dim_k: hp.head_dim_k,
                head_dim_v: hp.head_dim_v,
                scale,
                window: if sliding { hp.sliding_window } else { 0 },
            };
            let attn_dim = hp.n_head * hp.head_dim_v;
            let mut attn = scratch.take(n * attn_dim);
            attention(
                &shape,
                &q,
                self.kv.keys(il),
                self.kv.values(il),
                places,
                &mut attn,
            );
            scratch.give([q, k, v]);
            let [mut o] = project(gguf, ActSource::Rows(&attn), n, attn_dim, [&lw.wo], scratch)?;
            if let Some(b) = &lw.bo {
                ops::add_bias(&mut o, b);
            }
            let post = lw.post_attn_norm.as_deref();
            parallel::for_each_row(&mut x, e, &mut o, e, |_, x_t, o_t| {
                if let Some(pn) = post {
                    ops::rms_norm_rows_inplace(o_t, pn, hp.rms_eps);
                }
                ops::add_inplace(x_t, o_t);
            });
            scratch.give([attn, o]);

            // --- feed-forward block ---
            let [mut gate, up] = {
                let inv = row_inv_rms(&mut x, e, hp.rms_eps);
                let norm = normed(&x, e, &inv, &lw.ffn_norm);
                let gate_up = [&lw.ffn_gate, &lw.ffn_up];
                project(gguf, ActSource::Computed(&norm), n, e, gate_up, scratch)?
            };
            // The gated activation is a pass of its own: fed to the quantizer chunk by chunk
            // like the norms, it measured 1.06x the time of this pass plus quantizing (512
            // tokens of 8960): it is bound by its `exp` and division, not by memory, and the
            // chunk copy costs more than the write it saves.
            let (act, n_ff) = (model.arch.activation(), hp.n_ff);
            parallel::for_each_row(&mut gate, n_ff, &mut [0f32; 0], 0, |t, g_t, _| {
                let up_t = &up[t * n_ff..(t + 1) * n_ff];
                match act {
                    Activation::SwiGlu => ops::swiglu_inplace(g_t, up_t),
                    Activation::GeGlu => ops::geglu_inplace(g_t, up_t),
                }
            });
            let ffn_down = [&lw.ffn_down];
            let [mut down] = project(gguf, ActSource::Rows(&gate), n, n_ff, ffn_down, scratch)?;
            let post = lw.post_ffn_norm.as_deref();
            parallel::for_each_row(&mut x, e, &mut down, e, |_, x_t, d_t| {
                if let Some(pn) = post {
                    ops::rms_norm_rows_inplace(d_t, pn, hp.rms_eps);
                }
                ops::add_inplace(x_t, d_t);
            });
            scratch.give([gate, up, down]);
        }

        // Output head: only the rows whose logits are wanted.
        let out_rows: Vec<usize> = (0..n).filter(|&t| batch[t].logits).collect();
        if out_rows.is_empty() {
            scratch.give([x]);
            return Ok(Vec::new());
        }
        let m = out_rows.len();
        let mut h = Vec::with_capacity(m * e);
        for &t in &out_rows {
            h.extend_from_slice(&x[t * e..(t + 1) * e]);
        }
        scratch.give([x]);
        ops::rms_norm_rows_inplace(&mut h, &w.output_norm, hp.rms_eps);
        // The logits leave with the caller: a buffer of their own.
        let out_src = ActSource::Rows(&h);
        let [mut logits] = project(gguf, out_src, m, e, [&w.output], &mut Scratch::default())?;
        let cap = hp.final_logit_softcap;
        if cap > 0.0 {
            logits.iter_mut().for_each(|l| *l = cap * (*l / cap).tanh());
        }
        Ok(logits)
    }
}

/// The 1 / rms of each row of `x` (rows of `e`), in parallel row chunks for prompts. (`x` is
/// only read; `for_each_row` hands out rows of both its buffers mutably.)
fn row_inv_rms(x: &mut [f32], e: usize, eps: f32) -> Vec<f32> {
    let mut inv = vec![0f32; x.len() / e];
    parallel::for_each_row(&mut inv, 1, x, e, |_, inv_t, x_t| {
        inv_t[0] = ops::inv_rms(x_t, eps)
    });
    inv
}

/// Rows of `x` (rows of `e`) RMS-normalized with weights `w`, given each row's [`row_inv_rms`],
/// as an [`ActSource::Computed`] fill ([`ops::rms_norm_part`]): computed chunk by chunk as the
/// quantizer asks, so no normalized copy of `x` is written and read back.
fn normed<'a>(
    x: &'a [f32],
    e: usize,
    inv: &'a [f32],
    w: &'a [f32],
) -> impl Fn(usize, usize, &mut [f32]) + Sync + 'a {
    move |t, c0, out| {
        let part = c0..c0 + out.len();
        ops::rms_norm_part(&x[t * e..][part.clone()], &w[part], inv[t], out)
    }
}

/// Multiplies the same input rows ([n, k], from `src`) by several matrices, quantizing the
/// input once per activation format rather than once per matrix.
fn project<const N: usize>(
    gguf: &crate::gguf::GgufFile,
    src: ActSource,
    n: usize,
    k: usize,
    mats: [&Linear; N],
    scratch: &mut Scratch,
) -> Result<[Vec<f32>; N], ModelError> {
    let mut quantized: Vec<QuantizedActivations> = Vec::new();
    let mut outs: [Vec<f32>; N] = std::array::from_fn(|_| Vec::new());
    for (lin, out) in mats.iter().zip(outs.iter_mut()) {
        let format = lin.plan.needs().format;
        let act = match quantized.iter().position(|a| a.format() == format) {
            Some(i) => &quantized[i],
            None => {
                // With the side data if any matrix reading this format needs it.
                let needs = ActNeeds {
                    format,
                    sides: mats.iter().any(|m| {
                        m.plan.needs()
                            == ActNeeds {
                                format,
                                sides: true,
                            }
                    }),
                };
                let act = QuantizedActivations::quantize_from(kernels::backend(), src, n, k, needs);
                quantized.push(act.map_err(compute_err)?);
                quantized.last().expect("just pushed")
            }
        };
        // Every element is written by the matmul.
        *out = scratch.take_for_overwrite(n * lin.rows);
        lin.matmul(gguf, act, out).map_err(compute_err)?;
    }
    Ok(outs)
}

fn compute_err(e: kernels::KernelError) -> ModelError {
    ModelError::Compute(e.to_string())
}
