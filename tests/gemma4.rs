//! Gemma 4's memory: layers that share an earlier layer's KV cache take none of their own, and
//! the per-layer input table (the largest tensor of E2B/E4B files) is read a row per token,
//! never made resident whole. On the synthetic gemma4-tiny of scripts/make-synthetic-models.py
//! (6 layers, the last 2 sharing; a 262k x 192 per-layer table); its outputs against
//! llama.cpp's are tests/arch_reference.rs's.

mod common;

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, KvType, Logits, Model};

/// Resident bytes of this process now, file-backed and anonymous (Linux; 0 elsewhere).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        (status.lines())
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (kib("RssFile:") + kib("RssAnon:")) * 1024
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap()
}

#[test]
fn shared_kv_layers_and_per_layer_inputs_take_no_memory_of_their_own() {
    let path = common::synthetic::synthetic_path("gemma4-tiny");
    let file = std::fs::metadata(&path).unwrap().len();
    let before = rss();
    let model = Arc::new(Model::load(&path).unwrap());
    let hp = &model.hparams;
    assert_eq!(hp.attention_layers, [0, 1, 2, 3], "layers storing K/V");
    // Layers 4 (sliding) and 5 (global) read the last earlier layer of their kind.
    let reads: Vec<_> = (0..hp.n_layer).map(|il| hp.kv_layer(il)).collect();
    assert_eq!(reads, [0, 1, 2, 3, 2, 3].map(Some));

    let n_ctx = 256;
    let params = |ty| ContextParams {
        n_ctx,
        n_threads: 2,
        type_k: ty,
        type_v: ty,
        ..ContextParams::default()
    };
    let mut ctx = Context::new(Arc::clone(&model), &params(KvType::F16)).unwrap();
    // f16 keys and values of the 4 storing layers only, each of its own heads.
    let per_position: usize = (hp.attention_layers.iter())
        .map(|&il| hp.heads(il).n_head_kv * (hp.heads(il).head_dim_k + hp.heads(il).head_dim_v) * 2)
        .sum();
    assert_eq!(ctx.kv_bytes(), n_ctx * per_position);

    let prompt = model.tokenizer.encode(
        "The committee met on Tuesday to review the budget for the coming year, and",
        true,
        false,
    );
    let loaded = rss();
    let f16_logits = ctx.eval(&prompt, Logits::Last).unwrap();
    let evaluated = rss();
    if before > 0 {
        // The per-layer table ([262144, 192] Q4_0) stays in the file: a prompt brings in the
        // pages of its tokens' rows, not a quarter of the table (dequantized whole: 200 MB).
        let t = &model.weights.per_layer.as_ref().unwrap().token_embd;
        let table = (t.rows * t.row_bytes()) as u64;
        let grew = evaluated.saturating_sub(loaded);
        assert!(
            grew < table / 4,
            "a prompt made {grew} bytes resident (table {table})"
        );
        // All told, the model and its context hold at most 10% more than file + KV cache.
        let allowed = (file + ctx.kv_bytes() as u64) * 11 / 10;
        let held = evaluated.saturating_sub(before);
        assert!(held <= allowed, "{held} bytes resident, allowed {allowed}");
    }

    // A Q8_0 cache, which the shared layers read through their source's key basis, predicts
    // the same next token.
    let mut q8 = Context::new(Arc::clone(&model), &params(KvType::Q8_0)).unwrap();
    let q8_logits = q8.eval(&prompt, Logits::Last).unwrap();
    assert_eq!(argmax(&q8_logits), argmax(&f16_logits));
}
