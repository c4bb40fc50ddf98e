//! The multi-token-prediction block's pass (Qwen3.5 / 3.6 `nextn`): for a token at position p
//! and the trunk's hidden state of the token before it (the output norm's result, what the
//! head reads), the block predicts the token at p + 1:
//!
//!   x = eh_proj · [rms(embed(token), enorm); rms(hidden, hnorm)]      [n, n_embd]
//!   x = decoder block (a full-attention layer with its own KV cache rows at position p)
//!   h = rms(x, shared_head_norm)     logits = head · h
//!
//! `h` is what the next drafted token pairs with. The block's KV rows share the sequence's
//! positions, so rewinding the sequence rewinds them too.

use std::sync::Arc;

use super::forward::project;
use super::{BatchToken, Context};
use crate::kernels::ActSource;
use crate::model::attention::QueryPlace;
use crate::model::error::ModelError;
use crate::model::ops;
use crate::tokenizer::TokenId;

/// A token the block reads: its sequence and position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtpToken {
    pub token: TokenId,
    pub seq: usize,
    pub pos: usize,
}

/// What a pass of the block is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtpNeed {
    /// Drafting: each token's logits and hidden state.
    Drafts,
    /// Catching up: only the block's KV rows (its feed-forward part and head are skipped, and
    /// the output is empty).
    CacheRows,
}

/// What the block gives for each token: its logits and its hidden state.
pub struct MtpOutput {
    /// [n, n_vocab]
    pub logits: Vec<f32>,
    /// [n, n_embd]: after the head's norm.
    pub hidden: Vec<f32>,
}

impl Context {
    /// The block over `tokens` of sequence `seq` at positions `first_pos..` (see
    /// [`Context::mtp_batch`]).
    pub fn mtp_pass(
        &mut self,
        seq: usize,
        first_pos: usize,
        tokens: &[TokenId],
        hidden: &[f32],
    ) -> Result<MtpOutput, ModelError> {
        let places: Vec<MtpToken> = (tokens.iter().enumerate())
            .map(|(i, &token)| MtpToken {
                token,
                seq,
                pos: first_pos + i,
            })
            .collect();
        self.mtp_batch(&places, hidden, MtpNeed::Drafts)
    }

    /// The block over `tokens`, from any sequences, token t paired with row t of `hidden`
    /// ([n, n_embd]; the trunk's hidden state of the token before it, or the block's own for
    /// a drafted one). The block's KV rows at those positions are written; a sequence's
    /// tokens come in position order and see its rows up to their own. The sequences' tokens
    /// and the trunk's rows are not touched.
    pub fn mtp_batch(
        &mut self,
        tokens: &[MtpToken],
        hidden: &[f32],
        need: MtpNeed,
    ) -> Result<MtpOutput, ModelError> {
        let model = Arc::clone(&self.model);
        let (hp, w, gguf) = (&model.hparams, &model.weights, &model.gguf);
        let Some(mtp) = &w.mtp else {
            return Err(ModelError::InvalidArgument(
                "the model was loaded without its multi-token-prediction block".into(),
            ));
        };
        let (n, e) = (tokens.len(), hp.n_embd);
        if n == 0 || hidden.len() != n * e {
            return Err(ModelError::InvalidArgument(format!(
                "{n} tokens need {} hidden values, not {}",
                n * e,
                hidden.len()
            )));
        }
        let n_ctx = self.n_ctx();
        if let Some(t) = (tokens.iter()).find(|t| t.seq >= self.tokens.len() || t.pos >= n_ctx) {
            return Err(ModelError::InvalidArgument(format!(
                "position {} of sequence {} is outside the context",
                t.pos, t.seq
            )));
        }
        if let Some(t) = tokens.iter().find(|t| t.token as usize >= hp.n_vocab) {
            return Err(ModelError::InvalidToken {
                token: t.token,
                n_vocab: hp.n_vocab,
            });
        }
        // [n, 2 n_embd]: each token's normed embedding, then its normed hidden state.
        let embed = mtp.embed.as_ref().unwrap_or(&w.token_embd);
        let mut joined = vec![0f32; n * 2 * e];
        for (t, row) in joined.chunks_exact_mut(2 * e).enumerate() {
            let (emb, h) = row.split_at_mut(e);
            embed.dequantize_row_into(gguf, tokens[t].token as usize, emb);
            ops::rms_norm_rows_inplace(emb, &mtp.enorm, hp.rms_eps);
            h.copy_from_slice(&hidden[t * e..(t + 1) * e]);
            ops::rms_norm_rows_inplace(h, &mtp.hnorm, hp.rms_eps);
        }
        let src = ActSource::Rows(&joined);
        let [mut x] = project(gguf, src, n, 2 * e, [&mtp.eh_proj], &mut self.scratch)?;

        let places: Vec<QueryPlace> = (tokens.iter())
            .map(|t| QueryPlace {
                seq_row0: self.kv.row(t.seq, 0),
                pos: t.pos,
            })
            .collect();
        let batch: Vec<BatchToken> = (tokens.iter())
            .map(|t| BatchToken {
                token: t.token,
                seq: t.seq,
                logits: true,
            })
            .collect();
        let pool = Arc::clone(&self.pool);
        if need == MtpNeed::CacheRows {
            pool.install(|| {
                self.mix_tokens(&model, hp.n_layer, &mtp.block, &mut x, &batch, &places)
            })?;
            self.scratch.give([x]);
            return Ok(MtpOutput {
                logits: Vec::new(),
                hidden: Vec::new(),
            });
        }
        pool.install(|| {
            self.decoder_layer(
                &model, hp.n_layer, &mtp.block, &mut x, &batch, &places, None,
            )
        })?;

        let norm = mtp.head_norm.as_ref().unwrap_or(&w.output_norm);
        ops::rms_norm_rows_inplace(&mut x, norm, hp.rms_eps);
        let head = mtp.head.as_ref().unwrap_or(&w.output);
        let [mut logits] =
            pool.install(|| project(gguf, ActSource::Rows(&x), n, e, [head], &mut self.scratch))?;
        let cap = hp.final_logit_softcap;
        if cap > 0.0 {
            logits.iter_mut().for_each(|l| *l = cap * (*l / cap).tanh());
        }
        Ok(MtpOutput { logits, hidden: x })
    }
}
