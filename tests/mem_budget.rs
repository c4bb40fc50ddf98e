//! Memory budgets: the context and KV type chosen always fit the budget by the same formula
//! the cache is allocated with, grow with the budget, prefer the longest context and then the
//! most precise type, respect what the caller fixed, and refuse what cannot fit.

mod common;

use std::sync::Arc;

use kolibri::model::budget::{fit, fit_with_draft, BudgetRequest};
use kolibri::model::{Context, ContextParams, KvType, Model};

fn request(budget: u64) -> BudgetRequest {
    BudgetRequest {
        budget,
        n_seq: 1,
        n_batch: 512,
        n_ctx: None,
        types: None,
    }
}

#[test]
fn budgets_choose_what_fits() {
    let model = Arc::new(
        Model::load(common::model_path(
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ))
        .unwrap(),
    );
    let train = model.hparams.n_ctx_train;
    let mut last = 0;
    for mib in [570u64, 600, 700, 800, 1000, 2000, 8000] {
        let budget = mib << 20;
        let f = fit(&model, &request(budget)).unwrap();
        assert!(f.kv_bytes + f.fixed_bytes <= budget, "{mib} MiB: {f:?}");
        assert!(f.n_ctx >= last && f.n_ctx <= train, "{mib} MiB: {f:?}");
        last = f.n_ctx;
        // The cache of that shape is what the formula says.
        let ctx = Context::new(
            Arc::clone(&model),
            &ContextParams {
                n_ctx: f.n_ctx,
                type_k: f.type_k,
                type_v: f.type_v,
                n_threads: 1,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(ctx.kv_bytes() as u64, f.kv_bytes);
        // A more precise type would not reach the same context.
        if f.type_k != KvType::F16 {
            let mut r = request(budget);
            r.types = Some((KvType::F16, KvType::F16));
            assert!(
                fit(&model, &r).map_or(true, |g| g.n_ctx < f.n_ctx),
                "{mib} MiB"
            );
        }
    }
    assert_eq!(last, train);
    let big = fit(&model, &request(8000 << 20)).unwrap();
    assert_eq!((big.type_k, big.type_v), (KvType::F16, KvType::F16));

    // Fixed types and context are kept, or refused with a reason.
    let mut r = request(700 << 20);
    r.types = Some((KvType::Q8_0, KvType::F16));
    let f = fit(&model, &r).unwrap();
    assert_eq!((f.type_k, f.type_v), (KvType::Q8_0, KvType::F16));
    r.n_ctx = Some(train);
    r.budget = 570 << 20;
    let e = fit(&model, &r).unwrap_err().to_string();
    assert!(e.contains("not enough for 32768 tokens"), "{e}");
    let e = fit(&model, &request(100 << 20)).unwrap_err().to_string();
    assert!(e.contains("does not hold the model"), "{e}");
}

/// With a draft model, the budget holds both models and both caches (the draft's context has
/// the target's positions and types): a shorter context than alone, by the same formulas.
#[test]
fn a_draft_model_is_counted() {
    let model = Arc::new(
        Model::load(common::model_path(
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ))
        .unwrap(),
    );
    let budget = 1200 << 20;
    let alone = fit(&model, &request(budget)).unwrap();
    let both = fit_with_draft(&model, Some(&model), &request(budget)).unwrap();
    assert!(both.with_draft && !alone.with_draft);
    assert!(both.kv_bytes + both.fixed_bytes <= budget, "{both:?}");
    assert!(both.fixed_bytes > alone.fixed_bytes, "{both:?} {alone:?}");
    assert!(
        both.n_ctx < alone.n_ctx || both.type_k != alone.type_k,
        "{both:?} {alone:?}"
    );
    let params = ContextParams {
        n_ctx: both.n_ctx,
        type_k: both.type_k,
        type_v: both.type_v,
        n_threads: 1,
        ..Default::default()
    };
    let ctx = Context::new(Arc::clone(&model), &params).unwrap();
    assert_eq!(2 * ctx.kv_bytes() as u64, both.kv_bytes);
    assert!(both.to_string().contains("draft"), "{both}");
    // What only one model fits is refused with both.
    let e = fit_with_draft(
        &model,
        Some(&model),
        &request(alone.fixed_bytes + (8 << 20)),
    );
    assert!(e.is_err(), "{e:?}");
}
