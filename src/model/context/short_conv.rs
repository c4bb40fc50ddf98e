//! The short-convolution token mixer (LFM2): `[b | c | x] = in_proj(h)`, then per channel a
//! causal convolution of `b * x` over the last `kernel` positions, gated by `c`, then
//! `out_proj`. Its state per sequence is `b * x` of the last `kernel - 1` positions.

use super::conv_window::ConvInputs;
use super::forward::project;
use super::{BatchToken, Context};
use crate::kernels::ActSource;
use crate::model::attention::QueryPlace;
use crate::model::error::ModelError;
use crate::model::weights::ShortConvWeights;
use crate::model::Model;
use crate::parallel;

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
        // [n, n_embd]: b * x, the convolution's inputs
        let mut bx = self.scratch.take_for_overwrite(n * e);
        for (t, row) in bx.chunks_exact_mut(e).enumerate() {
            let r = &bcx[t * 3 * e..(t + 1) * 3 * e];
            row.iter_mut()
                .zip(&r[..e])
                .zip(&r[2 * e..])
                .for_each(|((bx, b), x)| *bx = b * x);
        }
        let inputs = ConvInputs::new(bx, batch, hp.conv_kernel, |seq| {
            self.recurrent.layer_state(seq, il).to_vec()
        });
        // [n, n_embd]: c * conv(b * x)
        let mut y = self.scratch.take_for_overwrite(n * e);
        parallel::for_each_row(&mut y, e, &mut [] as &mut [f32], 0, |t, y_t, _| {
            let c_gate = &bcx[t * 3 * e + e..t * 3 * e + 2 * e];
            inputs.convolve(t, &c.kernel, y_t, |ch, sum| c_gate[ch] * sum);
        });
        // The whole state is the convolution's: the last `kernel - 1` inputs.
        self.move_conv_states(il, (hp.conv_kernel - 1) * e, &inputs, places);
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
