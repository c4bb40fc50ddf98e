//! The Gated DeltaNet token mixer (Qwen3.5). Per token:
//!
//! ```text
//! [q | k | v] = silu(conv(qkv(h)))            causal conv over the last `kernel` positions
//! q, k        = l2_norm(q), l2_norm(k)        per key head
//! beta        = sigmoid(beta(h))              per value head: how strongly to write
//! g           = softplus(alpha(h) + dt) * a   per value head: log of the decay (a < 0)
//! per value head (its key head: h % n_k_heads), state S [head_v][head_k]:
//!   S     = exp(g) S
//!   S_j  += beta (v_j - S_j . k) k            the delta rule, value row j by row
//!   o_j   = S_j . q / sqrt(head_k)
//! out         = out(rms_norm(o) * silu(z(h)))  per value head
//! ```
//!
//! A head's state goes through a sequence's tokens one after another while it sits in cache
//! (heads in parallel), each row read and written once per token (its dot with `k`, its update
//! and its dot with `q`: [`crate::kernels::Backend::delta_rows`]). Its per-sequence memory: the
//! last `kernel - 1` convolution inputs, then each value head's `S`.

use super::conv_window::ConvInputs;
use super::forward::project;
use super::{BatchToken, Context};
use crate::kernels::{self, ActSource};
use crate::model::attention::QueryPlace;
use crate::model::error::ModelError;
use crate::model::hparams::DeltaNetShape;
use crate::model::ops;
use crate::model::recurrent::delta_net_conv_len;
use crate::model::weights::DeltaNetWeights;
use crate::model::Model;
use crate::parallel;

impl Context {
    /// Layer `il`'s delta net over its normed input `src` ([n, n_embd]): its output before
    /// the residual add, [n, n_embd]. Each sequence's state moves on by its tokens.
    pub(super) fn delta_net(
        &mut self,
        model: &Model,
        w: &DeltaNetWeights,
        il: usize,
        src: ActSource,
        batch: &[BatchToken],
        places: &[QueryPlace],
    ) -> Result<Vec<f32>, ModelError> {
        let (hp, gguf) = (&model.hparams, &model.gguf);
        let d = hp
            .delta_net
            .expect("delta-net layers have a delta-net shape");
        let (n, e) = (batch.len(), hp.n_embd);
        let vd = d.value_dim();
        // [n, conv_dim], [n, value_dim], [n, n_v_heads] twice
        let mats = [&w.qkv, &w.z, &w.beta, &w.alpha];
        let [mut qkv, mut z, beta, alpha] = project(gguf, src, n, e, mats, &mut self.scratch)?;
        // The rows before the convolution, which overwrites `qkv`.
        let inputs = ConvInputs::new(qkv.clone(), batch, d.conv_kernel, |seq| {
            self.recurrent.layer_state(seq, il)[..delta_net_conv_len(&d)].to_vec()
        });
        let gates = convolve_and_gate(model, w, &inputs, &mut qkv, &beta, &alpha);
        self.move_conv_states(il, delta_net_conv_len(&d), &inputs, places);
        // [n, value_dim]: the heads' outputs
        let mut o = self.scratch.take_for_overwrite(n * vd);
        for (seq, tokens) in inputs.sequences() {
            let run_inputs = |run| RunInputs {
                d: &d,
                qkv: &qkv,
                gates: &gates,
                tokens: run,
            };
            self.move_head_states(&d, il, seq, &tokens, places, run_inputs, &mut o);
        }
        // The gated norm: rms_norm(o) per head, times silu(z), left in z.
        parallel::for_each_row(&mut o, vd, &mut z, vd, |_, o_t, z_t| {
            ops::rms_norm_rows_inplace(o_t, &w.norm, hp.rms_eps);
            ops::swiglu_inplace(z_t, o_t);
        });
        self.scratch.give([qkv, o, beta, alpha]);
        let [out] = project(
            gguf,
            ActSource::Rows(&z),
            n,
            vd,
            [&w.out],
            &mut self.scratch,
        )?;
        self.scratch.give([z]);
        Ok(out)
    }
}

/// Phase 1, every token at once (rows in parallel): `qkv` ([n, conv_dim]) becomes the
/// convolution over each token's window of inputs with SiLU, its queries and keys
/// L2-normalised; returns each token's heads' (decay, beta), [n, n_v_heads].
fn convolve_and_gate(
    model: &Model,
    w: &DeltaNetWeights,
    inputs: &ConvInputs,
    qkv: &mut [f32],
    beta: &[f32],
    alpha: &[f32],
) -> Vec<(f32, f32)> {
    let hp = &model.hparams;
    let d = hp
        .delta_net
        .expect("delta-net layers have a delta-net shape");
    let n = qkv.len() / d.conv_dim();
    let mut gates = vec![(0f32, 0f32); n * d.n_v_heads];
    parallel::for_each_row(qkv, d.conv_dim(), &mut gates, d.n_v_heads, |t, x, g| {
        inputs.convolve(t, &w.conv, x, |_, sum| sum / (1.0 + (-sum).exp()));
        for head in x[..2 * d.key_dim()].chunks_exact_mut(d.head_k) {
            l2_normalize(head, hp.rms_eps);
        }
        for (h, g) in g.iter_mut().enumerate() {
            let at = t * d.n_v_heads + h;
            let decay = ops::softplus(alpha[at] + w.dt_bias[h]) * w.a[h];
            *g = (decay.exp(), 1.0 / (1.0 + (-beta[at]).exp()));
        }
    });
    gates
}

impl Context {
    /// Phase 2, head by head: sequence `seq`'s tokens (rows of the pass, in order) through
    /// each head's state, in runs that end where the pass records a snapshot (so a head's
    /// state stays in cache over a run, and is whole at each recorded position). Outputs go
    /// to the tokens' rows of `o`.
    #[allow(clippy::too_many_arguments)]
    fn move_head_states<'a>(
        &mut self,
        d: &DeltaNetShape,
        il: usize,
        seq: usize,
        tokens: &'a [usize],
        places: &[QueryPlace],
        run_inputs: impl Fn(&'a [usize]) -> RunInputs<'a>,
        o: &mut [f32],
    ) {
        let conv_len = delta_net_conv_len(d);
        let state_len = conv_len + d.n_v_heads * d.head_v * d.head_k;
        let recorded = self.recurrent.recorded_positions(seq);
        for run in runs(tokens, places, &recorded) {
            let heads = &mut self.recurrent.layer_state(seq, il)[conv_len..];
            run_inputs(run).through_heads(heads, o);
            let held = places[*run.last().expect("a run has tokens")].pos + 1;
            self.recurrent
                .record_part(seq, il, held, conv_len..state_len);
        }
    }
}

/// One run of a sequence's tokens (their indices in the batch, in order) through the
/// value heads.
struct RunInputs<'a> {
    d: &'a DeltaNetShape,
    /// [n, conv_dim]: the convolved, L2-normalised [q | k | v] of every token of the pass.
    qkv: &'a [f32],
    /// [n, n_v_heads]: each head's (decay, beta).
    gates: &'a [(f32, f32)],
    tokens: &'a [usize],
}

impl RunInputs<'_> {
    /// The run's tokens through every head's state (`heads`: [n_v_heads][head_v][head_k]), in
    /// parallel over heads; the outputs go to the tokens' rows of `o` ([n, value_dim]).
    fn through_heads(&self, heads: &mut [f32], o: &mut [f32]) {
        let d = self.d;
        let (kd, vd, hk, hv) = (d.key_dim(), d.value_dim(), d.head_k, d.head_v);
        let cd = d.conv_dim();
        let m = self.tokens.len();
        let scale = 1.0 / (hk as f32).sqrt();
        let backend = kernels::backend();
        // [n_v_heads][m][head_v]: each head's outputs, then put in token order.
        let mut by_head = vec![0f32; d.n_v_heads * m * hv];
        parallel::for_each_row(heads, hv * hk, &mut by_head, m * hv, |h, s, out| {
            let kh = h % d.n_k_heads;
            for (i, &t) in self.tokens.iter().enumerate() {
                let row = &self.qkv[t * cd..(t + 1) * cd];
                let q = &row[kh * hk..(kh + 1) * hk];
                let k = &row[kd + kh * hk..kd + (kh + 1) * hk];
                let v = &row[2 * kd + h * hv..2 * kd + (h + 1) * hv];
                let (decay, beta) = self.gates[t * d.n_v_heads + h];
                let o_t = &mut out[i * hv..(i + 1) * hv];
                backend.delta_rows(s, q, k, v, [decay, beta, scale], o_t);
            }
        });
        for (h, head) in by_head.chunks_exact(m * hv).enumerate() {
            for (i, &t) in self.tokens.iter().enumerate() {
                o[t * vd + h * hv..t * vd + (h + 1) * hv]
                    .copy_from_slice(&head[i * hv..(i + 1) * hv]);
            }
        }
    }
}

/// `tokens` (a sequence's, in order) cut into runs, each ending at a token after which the
/// pass records the state (`recorded`: positions as tokens held), or at the last token.
fn runs<'a>(tokens: &'a [usize], places: &[QueryPlace], recorded: &[usize]) -> Vec<&'a [usize]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &t) in tokens.iter().enumerate() {
        let held = places[t].pos + 1;
        if i + 1 == tokens.len() || recorded.binary_search(&held).is_ok() {
            out.push(&tokens[start..=i]);
            start = i + 1;
        }
    }
    out
}

/// `x / sqrt(sum(x²) + eps)` as llama.cpp computes it: an RMS norm with `eps / n`, scaled by
/// `1 / sqrt(n)`.
fn l2_normalize(x: &mut [f32], eps: f32) {
    let n = x.len() as f32;
    let mean = (x.iter().map(|&v| f64::from(v * v)).sum::<f64>() / f64::from(n)) as f32;
    let scale = 1.0 / (mean + eps / n).sqrt();
    let norm = 1.0 / n.sqrt();
    x.iter_mut().for_each(|v| *v = *v * scale * norm);
}
