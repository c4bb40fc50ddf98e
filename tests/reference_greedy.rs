//! Greedy generation against llama.cpp's reference outputs (tests/data/greedy-*.json).
//!
//! Teacher forcing: the reference tokens are fed one by one. Where llama.cpp's top-1/top-2 gap
//! is at least 0.3 nat our top-1 must be the same token; since we feed the same tokens, that
//! makes our own greedy continuation identical up to the first close call.
//!
//! The tolerances sit above the noise floor of exact computation on these models. The
//! reference was produced on an AVX-512 machine; llama.cpp itself (0c1e57098, the same commit)
//! built on an AVX2-only CPU differs from it by up to 0.22 nat at single steps of these very
//! cases. Our own paths, whose integer block sums are identical and which differ only in the
//! order of f32 additions (scalar, in-place AVX2, interleaved AVX2), differ from each other by
//! up to 0.69 nat on gemma and 0.19 nat on the 1.5B at single steps, and move a top-1/top-2 gap
//! by up to 0.24 nat (1.5B, `def fibonacci`, step 9): a last-bit difference can flip the
//! rounding of a quantized activation, and these models amplify it. The large log-probability
//! differences all fall on unlikely tokens (p 0.02-0.07), where they are small in probability.
//! So each case must stay within 0.06 nat of the reference on average over its steps, and at
//! every step within 0.35 nat or, for an unlikely token, within 0.05 in probability.

mod common;

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::sampling::log_softmax;
use serde_json::Value;

const CLOSE_CALL_GAP: f64 = 0.3;
const MEAN_LOGPROB_TOL: f64 = 0.06;
const STEP_LOGPROB_TOL: f64 = 0.35;
const STEP_PROB_TOL: f64 = 0.05;

fn check_model(reference: &str) {
    let path = common::data_path(reference);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let model =
        Arc::new(Model::load(common::model_path(doc["model_file"].as_str().unwrap())).unwrap());
    let mut failures = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let ids = |v: &Value| -> Vec<u32> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        };
        let prompt_ids = ids(&case["prompt_ids"]);
        let generated = ids(&case["generated_ids"]);
        assert_eq!(
            model.tokenizer.encode(prompt, true, true),
            prompt_ids,
            "prompt tokens of {prompt:?}"
        );

        let params = ContextParams {
            n_ctx: 512,
            n_threads: common::threads(),
            ..Default::default()
        };
        let mut ctx = Context::new(Arc::clone(&model), &params).unwrap();
        let mut logits = ctx.eval(&prompt_ids, Logits::Last).unwrap();
        let (mut max_dev, mut sum_dev) = (0f64, 0f64);
        let mut first_close_call = None;
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let top = step["top"].as_array().unwrap();
            let ref_id = step["id"].as_u64().unwrap() as usize;
            let ref_lp = step["logprob"].as_f64().unwrap();
            let gap = top[0]["logprob"].as_f64().unwrap() - top[1]["logprob"].as_f64().unwrap();
            let lp = log_softmax(&logits);
            let ours_top = lp
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .unwrap()
                .0;
            let dev = (lp[ref_id] as f64 - ref_lp).abs();
            max_dev = max_dev.max(dev);
            sum_dev += dev;
            let prob_dev = ((lp[ref_id] as f64).exp() - ref_lp.exp()).abs();
            if dev > STEP_LOGPROB_TOL && prob_dev > STEP_PROB_TOL {
                failures.push(format!(
                    "{prompt:?} step {i}: logprob of {ref_id} is {} vs {ref_lp}",
                    lp[ref_id]
                ));
            }
            if gap >= CLOSE_CALL_GAP && ours_top != top[0]["id"].as_u64().unwrap() as usize {
                failures.push(format!(
                    "{prompt:?} step {i}: top-1 {ours_top} vs reference {}",
                    top[0]["id"]
                ));
            }
            if gap < CLOSE_CALL_GAP && first_close_call.is_none() {
                first_close_call = Some(i);
            }
            if i + 1 < generated.len() {
                logits = ctx.eval(&[generated[i]], Logits::Last).unwrap();
            }
        }
        let mean_dev = sum_dev / generated.len() as f64;
        if mean_dev > MEAN_LOGPROB_TOL {
            failures.push(format!(
                "{prompt:?}: mean |dlogprob| {mean_dev:.4} > {MEAN_LOGPROB_TOL}"
            ));
        }
        eprintln!(
            "{reference} {prompt:?}: |dlogprob| mean {mean_dev:.4} max {max_dev:.4}, identical greedy ids through step {}",
            first_close_call.map_or(generated.len(), |s| s)
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn gemma3_270m_matches_llama_cpp() {
    check_model("greedy-gemma-3-270m.json");
}

#[test]
fn qwen25_coder_05b_matches_llama_cpp() {
    check_model("greedy-qwen2.5-coder-0.5b.json");
}

#[test]
fn qwen25_coder_15b_matches_llama_cpp() {
    check_model("greedy-qwen2.5-coder-1.5b.json");
}
