//! The feed-forward block: a dense gated FFN, or a mixture of experts done the CPU way (each
//! expert's weights read once for all the tokens routed to it, only the chosen experts read).

use std::sync::OnceLock;

use super::forward::project;
use crate::kernels::ActSource;
use crate::model::arch::{Activation, Gating};
use crate::model::error::ModelError;
use crate::model::hparams::MoeParams;
use crate::model::ops;
use crate::model::scratch::Scratch;
use crate::model::weights::{Experts, Ffn, SharedExpert};
use crate::model::Model;
use crate::parallel;

/// A row source: `fill(t, c0, out)` writes elements `c0..c0 + out.len()` of input row `t`.
pub(super) type RowFill<'a> = dyn Fn(usize, usize, &mut [f32]) + Sync + 'a;

/// The residual stream the FFN's input is the norm of ([n, n_embd]), and each row's
/// 1 / rms: for the blocks that norm it their own ways (experts beside a dense FFN).
#[derive(Clone, Copy)]
pub(super) struct Stream<'a> {
    pub x: &'a [f32],
    pub inv: &'a [f32],
}

/// `ffn(x)` for the rows of `stream` (`input`: their norm, computed on demand): [n, n_embd].
pub(super) fn ffn(
    model: &Model,
    ffn: &Ffn,
    input: &RowFill,
    stream: Stream,
    scratch: &mut Scratch,
) -> Result<Vec<f32>, ModelError> {
    let n = stream.inv.len();
    match ffn {
        Ffn::Dense { gate, up, down } => {
            dense_in_chunks(model, [gate, up, down], input, n, scratch)
        }
        Ffn::Moe(experts) => {
            let moe = model.hparams.moe.ok_or_else(|| {
                ModelError::Compute("mixture-of-experts layer without expert counts".into())
            })?;
            match &experts.beside {
                Some(dense) => super::moe_beside_dense::ffn(
                    model, experts, dense, &moe, input, stream, scratch,
                ),
                None => moe_ffn(model, experts, &moe, input, None, n, scratch),
            }
        }
    }
}

/// The dense gated FFN of `n` input rows, [n, n_embd], in chunks of tokens
/// ([`dense_chunk`]).
pub(super) fn dense_in_chunks(
    model: &Model,
    [gate, up, down]: [&crate::model::Linear; 3],
    input: &RowFill,
    n: usize,
    scratch: &mut Scratch,
) -> Result<Vec<f32>, ModelError> {
    let e = model.hparams.n_embd;
    let chunk = dense_chunk(gate.rows, n);
    if chunk == n {
        return dense_ffn(model, [gate, up, down], input, n, scratch);
    }
    let mut out = scratch.take_for_overwrite(n * e);
    for t0 in (0..n).step_by(chunk) {
        let m = chunk.min(n - t0);
        let rows = move |t: usize, c: usize, o: &mut [f32]| input(t0 + t, c, o);
        let d = dense_ffn(model, [gate, up, down], &rows, m, scratch)?;
        out[t0 * e..(t0 + m) * e].copy_from_slice(&d);
        scratch.give([d]);
    }
    Ok(out)
}

/// Most bytes the gate and up rows of one dense chunk take. A 512-token prompt pass through
/// the 1.5B's 8960-wide FFN held 37 MB of them, the largest part of its scratch memory; two
/// chunks of 256 tokens cut its peak RSS by 21 MiB at the same prompt speed (three of 192
/// cost 5%: the matmuls lose efficiency on fewer rows).
pub(crate) const DENSE_CHUNK_BYTES: usize = 32 << 20;

/// Tokens per dense FFN chunk for an FFN `width` wide: all `n` when their gate and up rows fit
/// [`DENSE_CHUNK_BYTES`], else `n` split evenly into as few chunks as fit, each a multiple of
/// 32 tokens (the matmul kernels' row tiles divide it).
fn dense_chunk(width: usize, n: usize) -> usize {
    let fit = (DENSE_CHUNK_BYTES / (2 * 4 * width.max(1))).max(32);
    if n <= fit {
        return n;
    }
    let even = n.div_ceil(n.div_ceil(fit)).next_multiple_of(32);
    if even <= fit {
        even
    } else {
        (fit / 32 * 32).max(32)
    }
}

/// The dense gated FFN of `n` input rows: `down(act(gate(x)) * up(x))`, [n, n_embd].
fn dense_ffn(
    model: &Model,
    [gate, up, down]: [&crate::model::Linear; 3],
    input: &RowFill,
    n: usize,
    scratch: &mut Scratch,
) -> Result<Vec<f32>, ModelError> {
    let gguf = &model.gguf;
    let e = model.hparams.n_embd;
    let [mut g, u] = project(gguf, ActSource::Computed(input), n, e, [gate, up], scratch)?;
    glu(model.arch.recipe.activation, &mut g, &u, gate.rows);
    let [out] = project(gguf, ActSource::Rows(&g), n, gate.rows, [down], scratch)?;
    scratch.give([g, u]);
    Ok(out)
}

/// `gate = act(gate) * up`, row by row (rows of `width`), in parallel row chunks for prompts.
/// A pass of its own: fed to the quantizer chunk by chunk like the norms, it measured 1.06x
/// the time of this pass plus quantizing (512 tokens of 8960): it is bound by its `exp` and
/// division, not by memory, and the chunk copy costs more than the write it saves.
fn glu(act: Activation, gate: &mut [f32], up: &[f32], width: usize) {
    parallel::for_each_row(gate, width, &mut [0f32; 0], 0, |t, g_t, _| {
        let up_t = &up[t * width..(t + 1) * width];
        match act {
            Activation::SwiGlu => ops::swiglu_inplace(g_t, up_t),
            Activation::GeGlu => ops::geglu_inplace(g_t, up_t),
            Activation::SwiGluOai { alpha, limit } => {
                ops::swiglu_oai_inplace(g_t, up_t, alpha, limit)
            }
        }
    });
}

/// The experts one token uses, (expert, weight) best first: the gate's scores of the router
/// logits (a softmax over all, each one's sigmoid, or the logits themselves), the top
/// `n_used` experts by score plus the selection `bias` if any (ties to the lower index), their
/// scores softmaxed among themselves ([`Gating::SoftmaxOfTopK`]) or renormalised to sum to 1
/// when `moe.norm_weights` (the sum clamped away from 0 as llama.cpp does), and scaled by
/// `moe.weights_scale`.
pub(crate) fn route(logits: &[f32], bias: Option<&[f32]>, moe: &MoeParams) -> Vec<(usize, f32)> {
    let probs: Vec<f32> = match moe.gating {
        Gating::Softmax => softmax(logits),
        Gating::Sigmoid => logits.iter().map(|&l| 1.0 / (1.0 + (-l).exp())).collect(),
        Gating::SoftmaxOfTopK => logits.to_vec(),
    };
    let score = |i: usize| probs[i] + bias.map_or(0.0, |b| b[i]);
    let mut order: Vec<usize> = (0..probs.len()).collect();
    // NaN logits (a broken model) sort last instead of panicking.
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
    let mut chosen: Vec<(usize, f32)> = order[..moe.n_expert_used]
        .iter()
        .map(|&i| (i, probs[i]))
        .collect();
    if moe.gating == Gating::SoftmaxOfTopK {
        let weights = softmax(&chosen.iter().map(|c| c.1).collect::<Vec<f32>>());
        chosen.iter_mut().zip(weights).for_each(|(c, w)| c.1 = w);
    }
    let norm = if moe.norm_weights {
        let total: f32 = chosen.iter().map(|c| c.1).sum();
        1.0 / total.max(6.103_515_6e-5)
    } else {
        1.0
    };
    chosen
        .iter_mut()
        .for_each(|c| c.1 *= norm * moe.weights_scale);
    chosen
}

fn softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
    let mut p: Vec<f32> = x.iter().map(|&l| (l - max).exp()).collect();
    let sum: f32 = p.iter().sum();
    p.iter_mut().for_each(|p| *p /= sum);
    p
}

/// Mixture of experts over `n` tokens: route each token, then for every expert that any token
/// chose, its tokens' inputs gathered into one batch (quantized once for gate and up, the
/// expert's rows read once for all of them), and its outputs added back to each token's row,
/// weighted.
///
/// `router_input`: the rows the router reads, where they are not the experts' input.
pub(super) fn moe_ffn(
    model: &Model,
    experts: &Experts,
    moe: &MoeParams,
    input: &RowFill,
    router_input: Option<&[f32]>,
    n: usize,
    scratch: &mut Scratch,
) -> Result<Vec<f32>, ModelError> {
    let gguf = &model.gguf;
    let e = model.hparams.n_embd;
    // The normalised inputs, materialised: the router reads them all, each expert a subset.
    let mut h = scratch.take_for_overwrite(n * e);
    parallel::for_each_row(&mut h, e, &mut [0f32; 0], 0, |t, h_t, _| input(t, 0, h_t));
    let router_rows = ActSource::Rows(router_input.unwrap_or(&h));
    let [mut logits] = project(gguf, router_rows, n, e, [&experts.router], scratch)?;
    if let Some(b) = &experts.biases {
        ops::add_bias(&mut logits, &b.router);
    }
    let routes: Vec<Vec<(usize, f32)>> = (logits.chunks(moe.n_expert))
        .map(|l| route(l, experts.selection_bias.as_deref(), moe))
        .collect();
    scratch.give([logits]);

    // tokens[x]: (token, weight) of every token routed to expert x, in token order; and each
    // token's place in its experts' batches, in its routing order.
    let mut tokens: Vec<Vec<(usize, f32)>> = vec![Vec::new(); moe.n_expert];
    let mut places: Vec<Vec<(usize, usize, f32)>> = vec![Vec::new(); n];
    for (t, r) in routes.iter().enumerate() {
        for &(x, w) in r {
            places[t].push((x, tokens[x].len(), w));
            tokens[x].push((t, w));
        }
    }
    // outputs[x]: expert x's output rows, one per routed token.
    let mut outputs: Vec<Vec<f32>> = vec![Vec::new(); moe.n_expert];
    let active: Vec<usize> = (0..moe.n_expert)
        .filter(|&x| !tokens[x].is_empty())
        .collect();
    let few_tokens = active.iter().all(|&x| tokens[x].len() <= FEW_TOKENS);
    if few_tokens || active.len() >= EXPERTS_PER_THREAD * parallel::threads() {
        // The experts side by side, each on one thread (its matmuls run serially there).
        let results: Vec<OnceLock<Result<Vec<f32>, ModelError>>> =
            active.iter().map(|_| OnceLock::new()).collect();
        parallel::for_each(active.len(), |i| {
            let x = active[i];
            let d = expert_ffn(model, experts, x, &tokens[x], &h, &mut Scratch::default());
            let _ = results[i].set(d);
        });
        for (&x, d) in active.iter().zip(results) {
            outputs[x] = d.into_inner().expect("the loop ran every expert")?;
        }
    } else {
        for &x in &active {
            outputs[x] = expert_ffn(model, experts, x, &tokens[x], &h, scratch)?;
        }
    }
    // Each token's experts summed in its routing order (as llama.cpp sums them), in parallel
    // over tokens.
    let mut out = scratch.take(n * e);
    parallel::for_each_row(&mut out, e, &mut [0f32; 0], 0, |t, o, _| {
        for &(x, j, w) in &places[t] {
            let d = &outputs[x][j * e..(j + 1) * e];
            o.iter_mut().zip(d).for_each(|(o, &v)| *o += w * v);
        }
    });
    if let Some(shared) = &experts.shared {
        add_shared_expert(model, shared, &h, n, &mut out, scratch)?;
    }
    scratch.give([h]);
    Ok(out)
}

/// The experts run side by side, each on one thread, when each has at most this many tokens
/// (an expert's matmuls for a token or two are too small for their parallel loops to pay for
/// starting) or when there are enough of them to keep every thread busy; otherwise one after
/// another with each matmul's rows split across threads. Measured on a 64-expert top-8 model,
/// 2 threads: generation 1.17x, a 512-token prompt 1.17x side by side.
const FEW_TOKENS: usize = 2;
const EXPERTS_PER_THREAD: usize = 4;

/// Expert `x` on the rows of `h` of its `routed` tokens: [routed.len(), n_embd].
fn expert_ffn(
    model: &Model,
    experts: &Experts,
    x: usize,
    routed: &[(usize, f32)],
    h: &[f32],
    scratch: &mut Scratch,
) -> Result<Vec<f32>, ModelError> {
    let (gguf, e, m) = (&model.gguf, model.hparams.n_embd, routed.len());
    // The routed rows of `h` go to the quantizer as it asks for them: no gathered copy.
    let gather = |j: usize, c0: usize, out: &mut [f32]| {
        let row = routed[j].0 * e + c0;
        out.copy_from_slice(&h[row..row + out.len()]);
    };
    let (gate, up, down) = (&experts.gate[x], &experts.up[x], &experts.down[x]);
    let [mut g, mut u] = project(
        gguf,
        ActSource::Computed(&gather),
        m,
        e,
        [gate, up],
        scratch,
    )?;
    let biases = experts.biases.as_ref();
    if let Some(b) = biases {
        ops::add_bias(&mut g, b.gate(x));
        ops::add_bias(&mut u, b.up(x));
    }
    glu(model.arch.recipe.activation, &mut g, &u, gate.rows);
    let [mut d] = project(gguf, ActSource::Rows(&g), m, gate.rows, [down], scratch)?;
    if let Some(s) = &experts.down_scale {
        d.iter_mut().for_each(|v| *v *= s[x]);
    }
    if let Some(b) = biases {
        ops::add_bias(&mut d, b.down(x));
    }
    scratch.give([g, u]);
    Ok(d)
}

/// `out += sigmoid(gate_inp · h) · ffn_shared(h)` for each of the `n` rows of `h`.
fn add_shared_expert(
    model: &Model,
    shared: &SharedExpert,
    h: &[f32],
    n: usize,
    out: &mut [f32],
    scratch: &mut Scratch,
) -> Result<(), ModelError> {
    let (gguf, e) = (&model.gguf, model.hparams.n_embd);
    let [mut g, u] = project(
        gguf,
        ActSource::Rows(h),
        n,
        e,
        [&shared.gate, &shared.up],
        scratch,
    )?;
    glu(model.arch.recipe.activation, &mut g, &u, shared.gate.rows);
    let [d] = project(
        gguf,
        ActSource::Rows(&g),
        n,
        shared.gate.rows,
        [&shared.down],
        scratch,
    )?;
    for ((o, d_t), h_t) in out
        .chunks_exact_mut(e)
        .zip(d.chunks_exact(e))
        .zip(h.chunks_exact(e))
    {
        let logit: f32 = shared.gate_inp.iter().zip(h_t).map(|(w, x)| w * x).sum();
        let s = 1.0 / (1.0 + (-logit).exp());
        o.iter_mut().zip(d_t).for_each(|(o, &v)| *o += s * v);
    }
    scratch.give([g, u, d]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moe(n_used: usize, norm_weights: bool, weights_scale: f32) -> MoeParams {
        MoeParams {
            n_expert: 4,
            n_expert_used: n_used,
            n_ff_exp: 8,
            norm_weights,
            weights_scale,
            n_ff_shexp: 0,
            gating: Gating::Softmax,
            n_dense_lead: 0,
        }
    }

    #[test]
    fn softmax_of_top_k_picks_by_logit_and_weighs_among_the_chosen() {
        let logits = [1.0, 3.0, -2.0, 2.0];
        let m = MoeParams {
            gating: Gating::SoftmaxOfTopK,
            ..moe(2, false, 1.0)
        };
        let r = route(&logits, None, &m);
        let ids: Vec<usize> = r.iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 3]);
        let z = 3f32.exp() + 2f32.exp();
        assert!((r[0].1 - 3f32.exp() / z).abs() < 1e-6);
        assert!((r[1].1 - 2f32.exp() / z).abs() < 1e-6);
    }

    #[test]
    fn route_takes_the_top_k_by_softmax_ties_to_the_lower_index() {
        let logits = [1.0, 3.0, 1.0, 2.0];
        let z: f32 = logits.iter().map(|l: &f32| l.exp()).sum();
        let r = route(&logits, None, &moe(3, false, 1.0));
        let ids: Vec<usize> = r.iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 3, 0]);
        assert!((r[0].1 - 3f32.exp() / z).abs() < 1e-6);
        assert!((r[2].1 - 1f32.exp() / z).abs() < 1e-6);
    }

    #[test]
    fn route_renormalises_and_scales_the_chosen_weights() {
        let logits = [0.5, -1.0, 2.0, 0.0];
        let r = route(&logits, None, &moe(2, true, 2.5));
        let ids: Vec<usize> = r.iter().map(|c| c.0).collect();
        assert_eq!(ids, [2, 0]);
        let sum: f32 = r.iter().map(|c| c.1).sum();
        assert!((sum - 2.5).abs() < 1e-5, "{sum}");
        let ratio = r[0].1 / r[1].1;
        assert!((ratio - 1.5f32.exp()).abs() < 1e-4, "{ratio}");
    }

    #[test]
    fn route_survives_nan_logits() {
        let r = route(&[f32::NAN, 1.0, 0.0, f32::NAN], None, &moe(2, true, 1.0));
        assert_eq!(r.len(), 2);
    }

    /// Chunks cover the batch, hold a multiple of 32 tokens (the last may be shorter), keep
    /// their gate and up rows within the budget where 32 tokens do.
    #[test]
    fn dense_chunks_fit_the_budget() {
        for width in [896, 4864, 8960, 18944, 53248, 1 << 20] {
            for n in [1, 31, 32, 200, 256, 257, 512, 513, 2048] {
                let c = dense_chunk(width, n);
                assert!((1..=n).contains(&c), "{width} {n}: {c}");
                if c == n {
                    continue;
                }
                assert_eq!(c % 32, 0, "{width} {n}: {c}");
                let bytes = 2 * 4 * width * c;
                assert!(bytes <= DENSE_CHUNK_BYTES || c == 32, "{width} {n}: {c}");
            }
        }
        assert_eq!(dense_chunk(8960, 512), 256);
        assert_eq!(dense_chunk(4864, 512), 512);
    }
}
