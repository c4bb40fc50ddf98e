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

/// What the block gives for each token: its logits and its hidden state.
pub struct MtpOutput {
    /// [n, n_vocab]
    pub logits: Vec<f32>,
    /// [n, n_embd]: after the head's norm.
    pub hidden: Vec<f32>,
}

impl Context {
    /// The block over `tokens` of sequence `seq` at positions `first_pos..`, token t paired with
    /// row t of `hidden` ([n, n_embd]; the trunk's hidden state of the token before it, or the
    /// block's own for a drafted one). The block's KV rows at those positions are written;
    /// the sequence's tokens and the trunk's rows are not touched.
    pub fn mtp_pass(
        &mut self,
        seq: usize,
        first_pos: usize,
        tokens: &[TokenId],
        hidden: &[f32],
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
        if seq >= self.tokens.len() || first_pos + n > self.n_ctx() {
            return Err(ModelError::InvalidArgument(format!(
                "positions {first_pos}..{} of sequence {seq} are outside the context",
                first_pos + n
            )));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= hp.n_vocab) {
            return Err(ModelError::InvalidToken {
                token: t,
                n_vocab: hp.n_vocab,
            });
        }
        // [n, 2 n_embd]: each token's normed embedding, then its normed hidden state.
        let embed = mtp.embed.as_ref().unwrap_or(&w.token_embd);
        let mut joined = vec![0f32; n * 2 * e];
        for (t, row) in joined.chunks_exact_mut(2 * e).enumerate() {
            let (emb, h) = row.split_at_mut(e);
            embed.dequantize_row_into(gguf, tokens[t] as usize, emb);
            ops::rms_norm_rows_inplace(emb, &mtp.enorm, hp.rms_eps);
            h.copy_from_slice(&hidden[t * e..(t + 1) * e]);
            ops::rms_norm_rows_inplace(h, &mtp.hnorm, hp.rms_eps);
        }
        let src = ActSource::Rows(&joined);
        let [mut x] = project(gguf, src, n, 2 * e, [&mtp.eh_proj], &mut self.scratch)?;

        let seq_row0 = self.kv.row(seq, 0);
        let places: Vec<QueryPlace> = (0..n)
            .map(|t| QueryPlace {
                seq_row0,
                pos: first_pos + t,
            })
            .collect();
        let batch: Vec<BatchToken> = (tokens.iter())
            .map(|&token| BatchToken {
                token,
                seq,
                logits: true,
            })
            .collect();
        let pool = Arc::clone(&self.pool);
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
