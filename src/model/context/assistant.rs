//! The assistant drafter's pass over the target's context ([`crate::model::Assistant`]): its
//! layers read the target's KV cache and write nothing to it.

use std::sync::Arc;

use super::forward::{normed, project, row_inv_rms};
use super::mtp::{MtpOutput, MtpToken};
use super::{Context, LayerRopes};
use crate::kernels::{ActSource, AttnScore};
use crate::model::attention::{AttentionShape, QueryPlace};
use crate::model::error::ModelError;
use crate::model::weights::TokenMixer;
use crate::model::{Assistant, Model};

impl Context {
    /// The assistant over `tokens`, from any sequences, token t paired with row t of `hidden`
    /// ([n, n_embd of the target]: the target's hidden state of the token before it, or the
    /// assistant's own for a drafted one). Each token sits at its position p and sees its
    /// sequence's cached positions before p (`1 <= p <= ` the sequence's length). Returns
    /// each token's logits and the hidden state its next draft pairs with.
    pub fn assistant_batch(
        &mut self,
        assistant: &Assistant,
        tokens: &[MtpToken],
        hidden: &[f32],
    ) -> Result<MtpOutput, ModelError> {
        let target = Arc::clone(&self.model);
        if !assistant.drafts_for(&target) {
            return Err(ModelError::InvalidArgument(format!(
                "the assistant was loaded for another model than {}",
                target.display_name()
            )));
        }
        let model = &assistant.model;
        let (hp, gguf) = (&model.hparams, &model.gguf);
        let (n, b) = (tokens.len(), target.hparams.n_embd);
        if n == 0 || hidden.len() != n * b {
            return Err(ModelError::InvalidArgument(format!(
                "{n} tokens need {} hidden values, not {}",
                n * b,
                hidden.len()
            )));
        }
        let seen = |t: &MtpToken| t.seq < self.tokens.len() && t.pos <= self.tokens[t.seq].len();
        if let Some(t) = tokens.iter().find(|t| t.pos == 0 || !seen(t)) {
            return Err(ModelError::InvalidArgument(format!(
                "the assistant reads the positions before {} of sequence {}: it holds none \
                 or not all of them",
                t.pos, t.seq
            )));
        }
        if let Some(t) = tokens.iter().find(|t| t.token as usize >= hp.n_vocab) {
            return Err(ModelError::InvalidToken {
                token: t.token,
                n_vocab: hp.n_vocab,
            });
        }
        // [n, 2B]: each token's target embedding, scaled as the target scales it, then the
        // hidden state it pairs with.
        let scale = (b as f32).sqrt();
        let mut joined = vec![0f32; n * 2 * b];
        for (t, row) in joined.chunks_exact_mut(2 * b).enumerate() {
            let (emb, h) = row.split_at_mut(b);
            let embd = &target.weights.token_embd;
            embd.dequantize_row_into(&target.gguf, tokens[t].token as usize, emb);
            emb.iter_mut().for_each(|v| *v *= scale);
            h.copy_from_slice(&hidden[t * b..(t + 1) * b]);
        }
        let pre = &assistant.projections.pre;
        let [mut x] = project(
            gguf,
            ActSource::Rows(&joined),
            n,
            2 * b,
            [pre],
            &mut self.scratch,
        )?;
        let places: Vec<QueryPlace> = (tokens.iter())
            .map(|t| QueryPlace {
                seq_row0: self.kv.row(t.seq, 0),
                pos: t.pos,
            })
            .collect();
        let ropes = LayerRopes::new(model, self.n_ctx());
        let pool = Arc::clone(&self.pool);
        pool.install(|| -> Result<(), ModelError> {
            for il in 0..hp.n_layer {
                self.assistant_layer(model, &ropes, il, &mut x, &places)?;
            }
            Ok(())
        })?;
        crate::model::ops::rms_norm_rows_inplace(&mut x, &model.weights.output_norm, hp.rms_eps);
        let mats = [&model.weights.output, &assistant.projections.post];
        let [logits, hidden] = pool.install(|| {
            project(
                gguf,
                ActSource::Rows(&x),
                n,
                hp.n_embd,
                mats,
                &mut self.scratch,
            )
        })?;
        self.scratch.give([x]);
        Ok(MtpOutput { logits, hidden })
    }

    /// Assistant layer `il` on its residual stream `x` ([n, n_embd]): attention with queries
    /// only, then the feed-forward block, as a Gemma 4 layer.
    fn assistant_layer(
        &mut self,
        model: &Model,
        ropes: &LayerRopes,
        il: usize,
        x: &mut Vec<f32>,
        places: &[QueryPlace],
    ) -> Result<(), ModelError> {
        let hp = &model.hparams;
        let lw = &model.weights.layers[il];
        let TokenMixer::Attention(a) = &lw.mixer else {
            unreachable!("an assistant's layers attend");
        };
        let (e, heads) = (hp.n_embd, hp.heads(il));
        let kl = hp
            .kv_layer(il)
            .expect("an assistant layer reads a cache layer");
        let mixed = {
            let inv = row_inv_rms(x, e, hp.rms_eps);
            let norm = normed(x, e, &inv, &lw.attn_norm);
            let src = ActSource::Computed(&norm);
            let [mut q] = project(
                &model.gguf,
                src,
                places.len(),
                e,
                [&a.wq],
                &mut self.scratch,
            )?;
            let rope = ropes.of(hp, il);
            self.position_queries_and_keys(model, a, (il, kl), rope, None, places, &mut q, &mut []);
            // Its token is not in the cache: it sees the positions before its own, as a query
            // one position back with a window one shorter would.
            let before: Vec<QueryPlace> = (places.iter())
                .map(|p| QueryPlace {
                    seq_row0: p.seq_row0,
                    pos: p.pos - 1,
                })
                .collect();
            let shape = AttentionShape {
                n_head: heads.n_head,
                n_head_kv: heads.n_head_kv,
                head_dim_k: heads.head_dim_k,
                head_dim_v: heads.head_dim_v,
                score: AttnScore::scaled(hp.attn_scale),
                window: match hp.is_sliding(il) {
                    true => hp.sliding_window - 1,
                    false => 0,
                },
                sinks: None,
            };
            self.attend(model, a, kl, &shape, q, &before, None)?
        };
        self.add_residual(x, mixed, lw.post_attn_norm.as_deref(), hp);
        self.mix_channels(model, il, lw, x, None)
    }
}
