//! The short-convolution token mixer (LFM2): `[b | c | x] = in_proj(h)`, then per channel a
//! causal convolution of `b * x` over the last `kernel` positions, gated by `c`, then
//! `out_proj`. Its state per sequence is `b * x` of the last `kernel - 1` positions.

use super::forward::project;
use super::{BatchToken, Context};
use crate::kernels::ActSource;
use crate::model::attention::QueryPlace;
use crate::model::error::ModelError;
use crate::model::weights::ShortConvWeights;
use crate::model::Model;

impl Context {
    /// Layer `il`'s short convolution over its normed input `src` ([n, n_embd]): its output
    /// before the residual add, [n, n_embd]. Each sequence's state moves on by its tokens.
    pub(super) fn short_conv(
        &mut self,
        model: &Model,
        c: &ShortConvWeights,
        il: usize,
        src: ActSource,
        batch: &[BatchToken],
        places: &[QueryPlace],
    ) -> Result<Vec<f32>, ModelError> {
        let (hp, gguf) = (&model.hparams, &model.gguf);
        let (n, e) = (batch.len(), hp.n_embd);
        // [n, 3 * n_embd]: b, c, x
        let [bcx] = project(gguf, src, n, e, [&c.in_proj], &mut self.scratch)?;
        // [n, n_embd]
        let mut y = self.scratch.take_for_overwrite(n * e);
        for (t, token) in batch.iter().enumerate() {
            let (gates, x) = bcx[t * 3 * e..(t + 1) * 3 * e].split_at(2 * e);
            let (b, c_gate) = gates.split_at(e);
            let state = self.recurrent.layer_state(token.seq, il);
            conv_step(state, &c.kernel, b, c_gate, x, &mut y[t * e..(t + 1) * e]);
            self.recurrent.record(token.seq, il, places[t].pos + 1);
        }
        self.scratch.give([bcx]);
        let [out] = project(
            gguf,
            ActSource::Rows(&y),
            n,
            e,
            [&c.out_proj],
            &mut self.scratch,
        )?;
        self.scratch.give([y]);
        Ok(out)
    }
}

/// One position of the gated convolution, channel by channel: `y = c * conv(state ++ [b * x])`,
/// then the state moves on (`b * x` becomes its newest row). `state`: [taps - 1][n_embd],
/// oldest first; `kernel`: [n_embd][taps], oldest tap first (as ggml's `ssm_conv` sums).
pub(crate) fn conv_step(
    state: &mut [f32],
    kernel: &[f32],
    b: &[f32],
    c: &[f32],
    x: &[f32],
    y: &mut [f32],
) {
    let e = b.len();
    let taps = kernel.len() / e;
    for ch in 0..e {
        let w = &kernel[ch * taps..(ch + 1) * taps];
        let bx = b[ch] * x[ch];
        let mut sum = 0f32;
        for (k, &wk) in w[..taps - 1].iter().enumerate() {
            sum += state[k * e + ch] * wk;
        }
        sum += bx * w[taps - 1];
        y[ch] = c[ch] * sum;
    }
    state.copy_within(e.., 0);
    let newest = state.len() - e;
    for ch in 0..e {
        state[newest + ch] = b[ch] * x[ch];
    }
}

#[cfg(test)]
mod tests {
    use super::conv_step;

    /// The step form against the convolution written out over a whole sequence.
    #[test]
    fn steps_compute_the_causal_convolution() {
        let (e, taps, n) = (3, 3, 6);
        let kernel: Vec<f32> = (0..e * taps).map(|i| 0.1 * i as f32 - 0.3).collect();
        let b: Vec<f32> = (0..n * e).map(|i| 1.0 + 0.05 * i as f32).collect();
        let c: Vec<f32> = (0..n * e).map(|i| 0.5 - 0.02 * i as f32).collect();
        let x: Vec<f32> = (0..n * e).map(|i| (i as f32 * 0.7).sin()).collect();
        let mut state = vec![0f32; (taps - 1) * e];
        for t in 0..n {
            let r = t * e..(t + 1) * e;
            let mut y = vec![0f32; e];
            conv_step(
                &mut state,
                &kernel,
                &b[r.clone()],
                &c[r.clone()],
                &x[r],
                &mut y,
            );
            for ch in 0..e {
                let mut want = 0f32;
                for k in 0..taps {
                    // Tap k sees position t - (taps - 1 - k); before the start, zeros.
                    if let Some(p) = (t + k).checked_sub(taps - 1) {
                        want += kernel[ch * taps + k] * b[p * e + ch] * x[p * e + ch];
                    }
                }
                want *= c[t * e + ch];
                assert!(
                    (y[ch] - want).abs() < 1e-6,
                    "t {t} ch {ch}: {} vs {want}",
                    y[ch]
                );
            }
        }
    }
}
