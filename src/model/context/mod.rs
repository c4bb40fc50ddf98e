//! A context: the KV cache of one or more sequences and the transformer forward pass over it.
//!
//! Several sequences share one forward pass ([`Context::decode`]): their tokens go through every
//! matrix multiplication together (each weight row is read once for the whole batch), and only
//! attention looks at each token's own sequence. This is what continuous batching is built on.
//!
//! The forward pass reads top to bottom like the architecture: embed, then per layer
//! norm → QKV → (QK-norm) → RoPE → attention → output projection → (post-norm) → residual,
//! norm → FFN (dense, or a mixture of experts) → (post-norm) → residual; final norm and the
//! output head (see `forward.rs` and `ffn.rs`).

mod assistant;
mod attention_layer;
mod balance;
mod centering;
mod conv_window;
mod delta_net;
mod ffn;
mod moe_beside_dense;
mod mtp;
pub(crate) use ffn::DENSE_CHUNK_BYTES;
pub use mtp::{MtpNeed, MtpOutput, MtpToken};
mod forward;
mod per_layer;
mod shift;
mod short_conv;
mod state;

use std::sync::Arc;

use super::arch::SwaRope;
use super::attention::QueryPlace;
use super::error::ModelError;
use super::hparams::HParams;
use super::kv_cache::{KvCache, KvShape, KvType};
use super::ops::{Rope, RopeParams};
use super::recurrent::{RecurrentMemory, Snapshot};
use super::scratch::Scratch;
use super::workers::Workers;
use super::Model;
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
    /// How the KV cache stores keys and values (f16 by default; Q8_0 halves the memory).
    pub type_k: KvType,
    pub type_v: KvType,
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: 4096,
            n_seq: 1,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            n_batch: 512,
            type_k: KvType::F16,
            type_v: KvType::F16,
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
    /// The attention layers' keys and values, per sequence and position.
    kv: KvCache,
    /// The recurrent layers' state, per sequence.
    recurrent: RecurrentMemory,
    /// The tokens each sequence holds, in position order.
    tokens: Vec<Vec<TokenId>>,
    n_batch: usize,
    pool: Arc<Workers>,
    ropes: LayerRopes,
    /// Asked before every layer whether to stop the forward pass (see [`Context::set_abort`]).
    abort: Option<AbortCallback>,
    /// The forward pass's activation buffers, kept between layers and passes.
    scratch: Scratch,
    /// Per layer, how a quantized cache's keys are scaled against the queries ([`balance`])
    /// and what is then subtracted from them ([`centering`]).
    key_balance: Vec<Option<balance::Balance>>,
    key_center: Vec<Option<Vec<f32>>>,
    /// The forward pass returns the final normed hidden states instead of logits
    /// ([`Context::embed`]).
    hidden_out: bool,
    /// Every token's final normed hidden state of the last [`Context::decode`], kept for a
    /// multi-token-prediction drafter ([`Context::keep_hidden`]); `None`: not kept.
    kept_hidden: Option<Vec<f32>>,
}

/// A context's RoPE tables: global layers', and (Gemma 3) sliding-window layers'.
struct LayerRopes {
    global: Rope,
    local: Rope,
}

impl LayerRopes {
    /// `model`'s tables for a context of `n_ctx` positions.
    fn new(model: &Model, n_ctx: usize) -> LayerRopes {
        let hp = &model.hparams;
        let style = model.arch.recipe.rope;
        let factors = (model.weights.rope_factors).for_context(n_ctx, hp.n_ctx_orig);
        let rope = |base, freq_scale, n_rot, factors| RopeParams {
            base,
            freq_scale,
            n_rot,
            style,
            factors,
            attn_factor: hp.rope_attn_factor,
            yarn: hp.yarn,
        };
        // Sliding layers with a RoPE of their own take no frequency factors (Gemma 4's
        // `rope_freqs` belong to its global layers).
        let own_swa_rope =
            (model.arch.recipe.sliding_window).is_some_and(|s| s.rope == SwaRope::Own);
        let local_factors = factors.filter(|_| !own_swa_rope);
        LayerRopes {
            global: Rope::new(&rope(
                hp.rope_base,
                hp.rope_freq_scale,
                hp.rope_dims,
                factors,
            )),
            local: Rope::new(&rope(
                hp.rope_base_swa,
                hp.rope_freq_scale_swa,
                hp.rope_dims_swa,
                local_factors,
            )),
        }
    }

    fn of(&self, hp: &HParams, il: usize) -> &Rope {
        if hp.is_sliding(il) {
            &self.local
        } else {
            &self.global
        }
    }
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
        let ropes = LayerRopes::new(&model, params.n_ctx);
        let kv = KvCache::new(&KvShape::of(
            hp,
            params.n_ctx,
            params.n_seq,
            params.type_k,
            params.type_v,
        ))?;
        let centers = centering::raw_centers(&model, &kv, &ropes);
        let key_balance = pool.install(|| balance::key_balances(&model, &kv, &ropes, &centers));
        let key_center = centering::in_cache_basis(centers, &key_balance, &kv);
        Ok(Context {
            kv,
            recurrent: RecurrentMemory::new(hp, params.n_seq)?,
            key_balance,
            key_center,
            model,
            tokens: vec![Vec::new(); params.n_seq],
            n_batch: params.n_batch,
            pool: Arc::new(pool),
            ropes,
            abort: None,
            scratch: Scratch::default(),
            hidden_out: false,
            kept_hidden: None,
        })
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// Tokens held in the cache (of sequence 0, the one [`Context::eval`] uses).
    pub fn n_past(&self) -> usize {
        self.tokens[0].len()
    }

    /// Bytes the KV cache takes when every position is written (it holds only those used).
    pub fn kv_bytes(&self) -> usize {
        self.kv.bytes()
    }

    /// Positions per sequence.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx
    }

    /// How the KV cache stores keys.
    pub fn type_k(&self) -> KvType {
        self.kv.type_k()
    }

    /// How the KV cache stores values.
    pub fn type_v(&self) -> KvType {
        self.kv.type_v()
    }

    /// Most tokens in one forward pass.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Worker threads of the forward pass (the calling thread included).
    pub fn n_threads(&self) -> usize {
        self.pool.threads()
    }

    /// Runs later forward passes on `n_threads` threads: a new pool, the old one's threads
    /// exit. The cache and results are unchanged.
    pub fn set_threads(&mut self, n_threads: usize) -> Result<(), ModelError> {
        if n_threads == 0 {
            return Err(ModelError::InvalidArgument("n_threads must be > 0".into()));
        }
        if n_threads != self.n_threads() {
            self.pool = Arc::new(Workers::new(n_threads)?);
        }
        Ok(())
    }

    pub fn n_seq(&self) -> usize {
        self.tokens.len()
    }

    /// Tokens held by sequence `seq` (panics if `seq >= n_seq`).
    pub fn seq_len(&self, seq: usize) -> usize {
        self.tokens[seq].len()
    }

    /// The tokens sequence `seq` holds, in position order (panics if `seq >= n_seq`).
    pub fn seq_tokens(&self, seq: usize) -> &[TokenId] {
        &self.tokens[seq]
    }

    /// Forgets every position of sequence `seq` from `n` on (panics if `seq >= n_seq`), and
    /// returns the tokens it keeps: `n` (or fewer if it held fewer), except on a model with
    /// recurrent layers when the state after `n` tokens is no longer known (more than
    /// [`Context::rewind_depth`] tokens back): then the longest shorter
    /// prefix whose state is, and the caller evaluates the rest again.
    pub fn truncate_seq(&mut self, seq: usize, n: usize) -> usize {
        let held = self.tokens[seq].len();
        let kept = self.recurrent.truncate(seq, held, n);
        self.tokens[seq].truncate(kept);
        self.kv.truncate_seq(seq, kept);
        kept
    }

    /// Makes sequence `dst` a copy of sequence `src` (its tokens and their keys and values):
    /// a prompt evaluated once serves several continuations (`n > 1` choices).
    pub fn copy_seq(&mut self, src: usize, dst: usize) {
        assert!(
            src < self.tokens.len() && dst < self.tokens.len(),
            "sequence out of range"
        );
        if src == dst {
            return;
        }
        let n = self.tokens[src].len();
        self.kv.copy_seq(src, dst, n);
        self.recurrent.copy_seq(src, dst);
        self.tokens[dst] = self.tokens[src].clone();
    }

    /// Tokens back from a sequence's end to which [`Context::truncate_seq`] is exact on a model
    /// with recurrent layers (`usize::MAX` without): speculation verifies at most this many
    /// tokens in a pass.
    pub fn rewind_depth(&self) -> usize {
        self.recurrent.rewind_depth()
    }

    /// Keeps sequence `seq`'s recurrent state at its current length as a checkpoint (a few
    /// per sequence; beyond them the closest pair is thinned), so a later truncation back to
    /// this length (a follow-up request sharing the prefix) keeps it instead of evaluating it
    /// again. Passes also keep checkpoints of their own: every 64 positions, and one before
    /// the end of a prompt. Nothing on models without recurrent layers.
    pub fn checkpoint_seq(&mut self, seq: usize) {
        let held = self.tokens[seq].len();
        self.recurrent.checkpoint(seq, held);
    }

    /// Zeroes sequence `seq`'s recurrent state, keeping its tokens and KV rows: for tests that
    /// show the recurrent layers matter.
    #[doc(hidden)]
    pub fn zero_recurrent_state(&mut self, seq: usize) {
        let held = self.tokens[seq].len();
        let zeros = vec![0.0; self.recurrent.state_len()];
        self.recurrent.set_seq_state(seq, held, &zeros);
    }

    /// Installs (or with `None` removes) a callback asked before each layer of every forward
    /// pass; when it returns `true`, `eval` stops with [`ModelError::Cancelled`] and the context
    /// keeps what it held before that call.
    pub fn set_abort(&mut self, abort: Option<AbortCallback>) {
        self.abort = abort;
    }

    /// Forgets every position of sequence 0 from `n` on: [`Context::truncate_seq`].
    pub fn truncate(&mut self, n: usize) -> usize {
        self.truncate_seq(0, n)
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

    /// The final hidden states (after the output norm, what llama.cpp's embeddings read) of
    /// `tokens` evaluated from the start of sequence `seq`: [n_tokens, n_embd]. The sequence
    /// holds `tokens` afterwards. On error the sequence is empty.
    pub fn embed(&mut self, seq: usize, tokens: &[TokenId]) -> Result<Vec<f32>, ModelError> {
        if seq >= self.tokens.len() {
            return Err(ModelError::InvalidArgument(format!(
                "sequence {seq} is not in 0..{}",
                self.tokens.len()
            )));
        }
        self.truncate_seq(seq, 0);
        let batch: Vec<BatchToken> = tokens
            .iter()
            .map(|&token| BatchToken {
                token,
                seq,
                logits: true,
            })
            .collect();
        self.hidden_out = true;
        let hidden = self.decode(&batch);
        self.hidden_out = false;
        hidden
    }

    /// Keep (or stop keeping) every evaluated token's final normed hidden state, what the head
    /// reads: a multi-token-prediction drafter pairs each token with the one before it.
    pub fn keep_hidden(&mut self, keep: bool) {
        self.kept_hidden = keep.then(Vec::new);
    }

    /// The final normed hidden states of every token of the last [`Context::decode`] (or
    /// `eval`), in batch order: [n, n_embd]; empty unless [`Context::keep_hidden`].
    pub fn last_hidden(&self) -> &[f32] {
        self.kept_hidden.as_deref().unwrap_or(&[])
    }

    /// Evaluates a batch of tokens from any of the context's sequences in one forward pass
    /// (split into passes of at most `n_batch` tokens) and returns the logits of the tokens
    /// marked `logits`, in batch order: [n_marked, n_vocab]. Each token is appended to its
    /// sequence; tokens of one sequence keep their batch order. On error nothing changes.
    pub fn decode(&mut self, batch: &[BatchToken]) -> Result<Vec<f32>, ModelError> {
        self.validate(batch)?;
        if let Some(kept) = &mut self.kept_hidden {
            kept.clear();
        }
        let before: Vec<usize> = self.tokens.iter().map(Vec::len).collect();
        let pass_len = self.n_batch.min(self.kv.rows_per_pass());
        // Several passes: a failure in a later one rewinds recurrent states further back than
        // their per-token snapshots may reach, so the states before the call are kept.
        let rollback = self.recurrent_rollback(batch, &before, pass_len);
        let mut logits = Vec::new();
        for chunk in batch.chunks(pass_len) {
            match self.pass(chunk) {
                // One pass (the usual case): its buffer is the result, not copied.
                Ok(out) if logits.is_empty() => logits = out,
                Ok(out) => logits.extend_from_slice(&out),
                Err(e) => {
                    for (seq, n) in before.into_iter().enumerate() {
                        if let Some(i) = rollback.iter().position(|(s, _)| *s == seq) {
                            self.recurrent.restore(seq, rollback[i].1.clone());
                        }
                        self.truncate_seq(seq, n);
                    }
                    return Err(e);
                }
            }
        }
        Ok(logits)
    }

    /// One forward pass appending `chunk` to its sequences; on error the recurrent states are
    /// as before it (the caller truncates the tokens and KV rows).
    fn pass(&mut self, chunk: &[BatchToken]) -> Result<Vec<f32>, ModelError> {
        let held: Vec<usize> = self.tokens.iter().map(Vec::len).collect();
        let mut added = vec![0; held.len()];
        chunk.iter().for_each(|b| added[b.seq] += 1);
        self.recurrent.begin_pass(&held, &added);
        let places: Vec<QueryPlace> = chunk
            .iter()
            .map(|b| {
                let pos = self.tokens[b.seq].len();
                self.tokens[b.seq].push(b.token);
                QueryPlace {
                    seq_row0: self.kv.row(b.seq, 0),
                    pos,
                }
            })
            .collect();
        let pool = Arc::clone(&self.pool);
        let out = pool.install(|| self.forward(chunk, &places));
        match out {
            Ok(_) => self.recurrent.end_pass(),
            Err(_) => self.recurrent.abandon_pass(),
        }
        out
    }

    /// The recurrent states of the sequences `batch` touches, when it takes several passes.
    fn recurrent_rollback(
        &self,
        batch: &[BatchToken],
        before: &[usize],
        pass_len: usize,
    ) -> Vec<(usize, Snapshot)> {
        if !self.recurrent.is_used() || batch.len() <= pass_len {
            return Vec::new();
        }
        let mut seqs: Vec<usize> = batch.iter().map(|b| b.seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        (seqs.into_iter())
            .map(|seq| (seq, self.recurrent.snapshot(seq, before[seq])))
            .collect()
    }

    fn validate(&self, batch: &[BatchToken]) -> Result<(), ModelError> {
        let n_vocab = self.model.hparams.n_vocab;
        if batch.is_empty() {
            return Err(ModelError::InvalidArgument("no tokens to evaluate".into()));
        }
        let mut added = vec![0usize; self.tokens.len()];
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
                    self.tokens.len()
                )));
            };
            *n += 1;
        }
        for (seq, &n) in added.iter().enumerate() {
            let held = self.tokens[seq].len();
            if held + n > self.kv.n_ctx {
                return Err(ModelError::ContextFull {
                    n_ctx: self.kv.n_ctx,
                    n_past: held,
                    requested: n,
                });
            }
        }
        Ok(())
    }
}
