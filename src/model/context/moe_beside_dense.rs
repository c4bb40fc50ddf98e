//! Experts beside a dense FFN (Gemma 4's 26B-A4B), as llama.cpp computes them from the
//! residual stream x:
//!
//! ```text
//! dense   = post_norm_1(ffn(ffn_norm(x)))
//! experts = post_norm_2(moe(pre_norm_2(x)))   routed by router(norm(x) / sqrt(n_embd) * scale)
//! out     = dense + experts
//! ```

use super::ffn::{dense_in_chunks, moe_ffn, RowFill, Stream};
use super::forward::normed;
use crate::model::error::ModelError;
use crate::model::hparams::MoeParams;
use crate::model::ops;
use crate::model::scratch::Scratch;
use crate::model::weights::{DenseBeside, Experts};
use crate::model::Model;
use crate::parallel;

/// The block's output for the rows of `stream` ([n, n_embd]); `input` is `ffn_norm(x)`.
pub(super) fn ffn(
    model: &Model,
    experts: &Experts,
    dense: &DenseBeside,
    moe: &MoeParams,
    input: &RowFill,
    stream: Stream,
    scratch: &mut Scratch,
) -> Result<Vec<f32>, ModelError> {
    let (hp, n) = (&model.hparams, stream.inv.len());
    let e = hp.n_embd;
    let mats = [&dense.gate, &dense.up, &dense.down];
    let mut out = dense_in_chunks(model, mats, input, n, scratch)?;
    // [n, n_embd]: the router's input.
    let mut routed = scratch.take_for_overwrite(n * e);
    let root = 1.0 / (e as f32).sqrt();
    parallel::for_each_row(&mut routed, e, &mut [0f32; 0], 0, |t, r, _| {
        let x = &stream.x[t * e..(t + 1) * e];
        for ((r, &x), &s) in r.iter_mut().zip(x).zip(&dense.router_scale) {
            *r = x * stream.inv[t] * root * s;
        }
    });
    let pre_norm_2 = normed(stream.x, e, stream.inv, &dense.pre_norm_2);
    let mut mixed = moe_ffn(model, experts, moe, &pre_norm_2, Some(&routed), n, scratch)?;
    scratch.give([routed]);
    parallel::for_each_row(&mut out, e, &mut mixed, e, |_, d, m| {
        ops::rms_norm_rows_inplace(d, &dense.post_norm_1, hp.rms_eps);
        ops::rms_norm_rows_inplace(m, &dense.post_norm_2, hp.rms_eps);
        ops::add_inplace(d, m);
    });
    scratch.give([mixed]);
    Ok(out)
}
