//! The causal depthwise convolution of the recurrent token mixers (LFM2's short convolution,
//! the Gated DeltaNet's input convolution) over a whole pass: every token's window of inputs
//! comes from its sequence's earlier tokens of the pass or its state before the pass, so all
//! tokens convolve at once; each sequence's state then moves on to its last inputs.

use super::{BatchToken, Context};
use crate::model::attention::QueryPlace;

/// The inputs of the causal convolution over a pass: each sequence's state before it (its last
/// `taps - 1` inputs, oldest first) followed by its tokens' projected rows, in order.
pub(super) struct ConvInputs {
    /// [n, conv_dim]: the tokens' rows before the convolution.
    raw: Vec<f32>,
    conv_dim: usize,
    taps: usize,
    /// Per token: its sequence's place in `seqs`, and its index among that sequence's tokens.
    at: Vec<(usize, usize)>,
    /// Per sequence of the pass: its id, its state before the pass ([taps - 1][conv_dim]) and
    /// its tokens (their rows), in order.
    seqs: Vec<(usize, Vec<f32>, Vec<usize>)>,
}

impl ConvInputs {
    pub fn new(
        raw: Vec<f32>,
        batch: &[BatchToken],
        taps: usize,
        mut state: impl FnMut(usize) -> Vec<f32>,
    ) -> ConvInputs {
        let mut seqs: Vec<(usize, Vec<f32>, Vec<usize>)> = Vec::new();
        let mut at = Vec::with_capacity(batch.len());
        for (t, token) in batch.iter().enumerate() {
            let s = match seqs.iter().position(|(id, ..)| *id == token.seq) {
                Some(s) => s,
                None => {
                    seqs.push((token.seq, state(token.seq), Vec::new()));
                    seqs.len() - 1
                }
            };
            at.push((s, seqs[s].2.len()));
            seqs[s].2.push(t);
        }
        ConvInputs {
            conv_dim: raw.len() / batch.len().max(1),
            raw,
            taps,
            at,
            seqs,
        }
    }

    /// Input `u` of the sequence at `s`: its state's rows, then its tokens'.
    fn input(&self, s: usize, u: usize) -> &[f32] {
        let (c, (_, state, rows)) = (self.conv_dim, &self.seqs[s]);
        match u.checked_sub(self.taps - 1) {
            None => &state[u * c..(u + 1) * c],
            Some(i) => &self.raw[rows[i] * c..(rows[i] + 1) * c],
        }
    }

    /// Token `t`'s output: `x[ch] = finish(ch, conv(window)[ch])` over its last `taps`
    /// inputs (`finish`: the mixer's activation or gate). `kernel`: [conv_dim][taps], oldest
    /// tap first (as ggml's `ssm_conv` sums).
    pub fn convolve(
        &self,
        t: usize,
        kernel: &[f32],
        x: &mut [f32],
        finish: impl Fn(usize, f32) -> f32,
    ) {
        let (s, i) = self.at[t];
        let window: Vec<&[f32]> = (0..self.taps).map(|k| self.input(s, i + k)).collect();
        for (ch, x) in x.iter_mut().enumerate() {
            let w = &kernel[ch * self.taps..(ch + 1) * self.taps];
            let mut sum = 0f32;
            for (input, &wk) in window.iter().zip(w) {
                sum += input[ch] * wk;
            }
            *x = finish(ch, sum);
        }
    }

    /// The sequences of the pass: (id, their tokens' rows in order).
    pub fn sequences(&self) -> Vec<(usize, Vec<usize>)> {
        (self.seqs.iter())
            .map(|(id, _, rows)| (*id, rows.clone()))
            .collect()
    }

    /// The convolution state of sequence `seq` after its `i`-th token of the pass: its last
    /// `taps - 1` inputs.
    pub fn state_after(&self, seq: usize, i: usize, out: &mut [f32]) {
        let s = (self.seqs.iter().position(|(id, ..)| *id == seq)).expect("a sequence of the pass");
        let c = self.conv_dim;
        for (k, row) in out.chunks_exact_mut(c).enumerate() {
            row.copy_from_slice(self.input(s, i + 1 + k));
        }
    }
}

impl Context {
    /// Each sequence's convolution state moves on to its last inputs, recorded where the pass
    /// keeps snapshots.
    /// `conv_len`: the floats of the convolution state, at the start of layer `il`'s state.
    pub(super) fn move_conv_states(
        &mut self,
        il: usize,
        conv_len: usize,
        inputs: &ConvInputs,
        places: &[QueryPlace],
    ) {
        for (seq, rows) in inputs.sequences() {
            for held in self.recurrent.recorded_positions(seq) {
                let Some(i) = rows.iter().position(|&t| places[t].pos + 1 == held) else {
                    continue;
                };
                let state = &mut self.recurrent.layer_state(seq, il)[..conv_len];
                inputs.state_after(seq, i, state);
                self.recurrent.record_part(seq, il, held, 0..conv_len);
            }
            let state = &mut self.recurrent.layer_state(seq, il)[..conv_len];
            inputs.state_after(seq, rows.len() - 1, state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BatchToken, ConvInputs};

    #[test]
    fn convolution_over_a_pass_is_the_causal_convolution_with_silu() {
        let (c, taps, n) = (3, 4, 7);
        let kernel: Vec<f32> = (0..c * taps).map(|i| 0.1 * i as f32 - 0.5).collect();
        let xs: Vec<f32> = (0..n * c).map(|i| (i as f32 * 0.9).cos()).collect();
        // One sequence, its state before the pass: inputs at positions -3..-1.
        let before: Vec<f32> = (0..(taps - 1) * c).map(|i| 0.2 * i as f32 - 0.4).collect();
        let batch: Vec<BatchToken> = (0..n)
            .map(|_| BatchToken {
                token: 0,
                seq: 0,
                logits: false,
            })
            .collect();
        let inputs = ConvInputs::new(xs.clone(), &batch, taps, |_| before.clone());
        // Inputs by position: the state's rows, then the tokens'.
        let all: Vec<f32> = before.iter().chain(&xs).copied().collect();
        for t in 0..n {
            let mut x = xs[t * c..(t + 1) * c].to_vec();
            inputs.convolve(t, &kernel, &mut x, |_, sum| sum / (1.0 + (-sum).exp()));
            for ch in 0..c {
                let sum: f32 = (0..taps)
                    .map(|k| all[(t + k) * c + ch] * kernel[ch * taps + k])
                    .sum();
                let want = sum / (1.0 + (-sum).exp());
                assert!((x[ch] - want).abs() < 1e-6, "t {t} ch {ch}");
            }
            let mut state = vec![0f32; (taps - 1) * c];
            inputs.state_after(0, t, &mut state);
            assert_eq!(state, all[(t + 1) * c..(t + taps) * c]);
        }
    }
}
