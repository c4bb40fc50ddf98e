//! Architecture files with a required tensor missing or mis-shaped, or with expert counts that
//! contradict each other or the tensors, get an error that names the problem — never a panic.
//! Built from the synthetic models of scripts/make-synthetic-models.py by rewriting one key or
//! tensor.

mod common;

use common::synthetic::{rewrite, synthetic};

use kolibri::gguf::{Array, Value, ValueType};
use kolibri::model::Model;

/// The load error of `bytes`, as text.
fn load_error(tag: &str, bytes: &[u8]) -> String {
    let p = std::env::temp_dir().join(format!("kolibri-arch-{tag}-{}.gguf", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    let result = Model::load(&p);
    std::fs::remove_file(&p).unwrap();
    match result {
        Ok(_) => panic!("{tag}: a broken model loaded"),
        Err(e) => e.to_string(),
    }
}

fn expect(tag: &str, bytes: &[u8], words: &[&str]) {
    let msg = load_error(tag, bytes);
    for w in words {
        assert!(msg.contains(w), "{tag}: {msg:?} does not name {w:?}");
    }
}

#[test]
fn broken_expert_counts_are_named() {
    let moe = synthetic("qwen3moe-tiny");
    let set =
        |k: &'static str, v: u32| rewrite(&moe, Some((k, Some(Value::U32(v)))), |_, d| Some(d));
    expect(
        "zero-experts",
        &set("qwen3moe.expert_count", 0),
        &["qwen3moe.expert_count", "0"],
    );
    expect(
        "more-experts",
        &set("qwen3moe.expert_count", 32),
        &["qwen3moe.expert_count", "32", "16", "ffn_gate_inp"],
    );
    expect(
        "used-above-count",
        &set("qwen3moe.expert_used_count", 17),
        &["qwen3moe.expert_used_count", "17", "16"],
    );
    expect(
        "zero-used",
        &set("qwen3moe.expert_used_count", 0),
        &["qwen3moe.expert_used_count"],
    );
    let no_count = rewrite(&moe, Some(("qwen3moe.expert_count", None)), |_, d| Some(d));
    expect("no-count", &no_count, &["qwen3moe.expert_count"]);
}

#[test]
fn missing_or_misshaped_tensors_are_named() {
    for (model, tensor) in [
        ("qwen3-tiny", "blk.1.attn_q_norm.weight"),
        ("qwen3-tiny", "blk.2.ffn_down.weight"),
        ("qwen3moe-tiny", "blk.0.ffn_gate_inp.weight"),
        ("qwen3moe-tiny", "blk.2.ffn_up_exps.weight"),
        ("qwen3moe-tiny", "blk.1.attn_k_norm.weight"),
        ("phi3-tiny", "blk.1.attn_qkv.weight"),
        ("phi3-tiny", "blk.0.ffn_up.weight"),
        ("gemma2-tiny", "blk.2.post_ffw_norm.weight"),
        ("gemma2-tiny", "blk.3.attn_q.weight"),
    ] {
        let src = synthetic(model);
        let dropped = rewrite(&src, None, |name, d| (name != tensor).then_some(d));
        expect(
            &format!("{model}-no-{tensor}"),
            &dropped,
            &["missing tensor", tensor],
        );
        // The same bytes under swapped dims: a shape error naming the tensor.
        let swapped = rewrite(&src, None, |name, mut d| {
            if name == tensor {
                let last = d.len() - 1;
                d.swap(0, last);
                if d.len() == 1 {
                    d = vec![d[0] / 2, 2];
                }
            }
            Some(d)
        });
        expect(&format!("{model}-shape-{tensor}"), &swapped, &[tensor]);
    }
}

#[test]
fn bad_window_softcap_and_rope_keys_are_named() {
    let gemma2 = synthetic("gemma2-tiny");
    let set = |k: &'static str, v: Value| rewrite(&gemma2, Some((k, Some(v))), |_, d| Some(d));
    expect(
        "pattern-length",
        &set(
            "gemma2.attention.sliding_window_pattern",
            Value::Array(Array::new(ValueType::Bool, vec![Value::Bool(true); 3])),
        ),
        &["gemma2.attention.sliding_window_pattern", "3", "4 layers"],
    );
    expect(
        "negative-softcap",
        &set("gemma2.attn_logit_softcapping", Value::F32(-1.0)),
        &["gemma2.attn_logit_softcapping"],
    );
    let phi3 = synthetic("phi3-tiny");
    let set = |k: &'static str, v: Value| rewrite(&phi3, Some((k, Some(v))), |_, d| Some(d));
    expect(
        "dynamic",
        &set("phi3.rope.scaling.type", Value::String("dynamic".into())),
        &["phi3.rope.scaling.type", "dynamic"],
    );
    expect(
        "nan-attn-factor",
        &set("phi3.rope.scaling.attn_factor", Value::F32(f32::NAN)),
        &["phi3.rope.scaling.attn_factor"],
    );
    // Llama 3.1's factors cover the global rotation; sliding layers that take them must rotate
    // as many dimensions.
    let llama3 = synthetic("llama3-tiny");
    let set = |k: &'static str, v: Value| rewrite(&llama3, Some((k, Some(v))), |_, d| Some(d));
    expect(
        "swa-rope-dims",
        &set("llama.rope.dimension_count_swa", Value::U32(16)),
        &["llama.rope.dimension_count_swa", "16"],
    );
}

#[test]
fn broken_short_convolution_layers_are_named() {
    let lfm2 = synthetic("lfm2-tiny");
    let set = |k: &'static str, v: Option<Value>| rewrite(&lfm2, Some((k, v)), |_, d| Some(d));
    for taps in [0, 1, 1 << 30] {
        expect(
            &format!("kernel-{taps}"),
            &set("lfm2.shortconv.l_cache", Some(Value::U32(taps))),
            &["lfm2.shortconv.l_cache", &taps.to_string()],
        );
    }
    expect(
        "no-kernel",
        &set("lfm2.shortconv.l_cache", None),
        &["lfm2.shortconv.l_cache"],
    );
    let heads = |v: Vec<u32>| {
        let items = v.into_iter().map(Value::U32).collect();
        Some(Value::Array(Array::new(ValueType::U32, items)))
    };
    expect(
        "kv-heads-differ",
        &set("lfm2.attention.head_count_kv", heads(vec![0, 0, 2, 0, 4])),
        &["lfm2.attention.head_count_kv", "different KV head counts"],
    );
    expect(
        "kv-heads-per-layer-count",
        &set("lfm2.attention.head_count_kv", heads(vec![0, 0, 2])),
        &["lfm2.attention.head_count_kv", "one per layer (5)"],
    );
    // A layer made an attention layer has no attention tensors; one made a convolution layer
    // lacks the convolution's.
    expect(
        "conv-as-attention",
        &set("lfm2.attention.head_count_kv", heads(vec![2, 0, 2, 0, 2])),
        &["missing tensor", "blk.0.attn_q.weight"],
    );
    expect(
        "attention-as-conv",
        &set("lfm2.attention.head_count_kv", heads(vec![0, 0, 0, 0, 2])),
        &["missing tensor", "blk.2.shortconv.in_proj.weight"],
    );
    for tensor in [
        "blk.1.shortconv.conv.weight",
        "blk.3.shortconv.in_proj.weight",
        "blk.0.shortconv.out_proj.weight",
        "token_embd_norm.weight",
    ] {
        let dropped = rewrite(&lfm2, None, |name, d| (name != tensor).then_some(d));
        expect(
            &format!("lfm2-no-{tensor}"),
            &dropped,
            &["missing tensor", tensor],
        );
    }
}

#[test]
fn broken_delta_net_layers_are_named() {
    let qwen35 = synthetic("qwen35-tiny");
    let set = |k: &'static str, v: Option<Value>| rewrite(&qwen35, Some((k, v)), |_, d| Some(d));
    for (key, value, words) in [
        (
            "qwen35.ssm.state_size",
            0,
            vec!["qwen35.ssm.state_size", "0"],
        ),
        (
            "qwen35.ssm.state_size",
            1 << 20,
            vec!["qwen35.ssm.state_size"],
        ),
        ("qwen35.ssm.conv_kernel", 0, vec!["qwen35.ssm.conv_kernel"]),
        (
            "qwen35.ssm.conv_kernel",
            1,
            vec!["qwen35.ssm.conv_kernel", "1 taps"],
        ),
        (
            "qwen35.ssm.time_step_rank",
            3,
            vec!["qwen35.ssm.time_step_rank", "3 value heads"],
        ),
        (
            "qwen35.ssm.inner_size",
            100,
            vec!["qwen35.ssm.inner_size", "100"],
        ),
        (
            "qwen35.full_attention_interval",
            0,
            vec!["qwen35.full_attention_interval"],
        ),
    ] {
        expect(
            &format!("{key}-{value}"),
            &set(key, Some(Value::U32(value))),
            &words,
        );
    }
    expect(
        "no-state-size",
        &set("qwen35.ssm.state_size", None),
        &["qwen35.ssm.state_size"],
    );
    let layers = |v: Vec<bool>| {
        let items = v.into_iter().map(Value::Bool).collect();
        Some(Value::Array(Array::new(ValueType::Bool, items)))
    };
    expect(
        "recurrent-layers-count",
        &set(
            "qwen35.attention.recurrent_layers",
            layers(vec![true, false]),
        ),
        &[
            "qwen35.attention.recurrent_layers",
            "one bool per layer (4)",
        ],
    );
    // Layer 3 made recurrent has no delta-net tensors.
    expect(
        "attention-as-delta-net",
        &set("qwen35.attention.recurrent_layers", layers(vec![true; 4])),
        &["missing tensor", "blk.3.attn_qkv.weight"],
    );
    for tensor in [
        "blk.0.ssm_conv1d.weight",
        "blk.1.ssm_a",
        "blk.2.ssm_dt.bias",
        "blk.0.ssm_norm.weight",
        "blk.1.attn_gate.weight",
        "blk.3.post_attention_norm.weight",
    ] {
        let dropped = rewrite(&qwen35, None, |name, d| (name != tensor).then_some(d));
        expect(
            &format!("qwen35-no-{tensor}"),
            &dropped,
            &["missing tensor", tensor],
        );
    }
}

/// A Qwen3.5 file with its multi-token-prediction block: `nextn_predict_layers` that leaves no
/// trunk is named; per-layer arrays may hold the block's entry (as the converter writes them)
/// or the trunk's only, and anything else is named.
#[test]
fn multi_token_prediction_layer_counts() {
    let mtp = synthetic("qwen35-mtp-tiny");
    let set = |k: &'static str, v: Option<Value>| rewrite(&mtp, Some((k, v)), |_, d| Some(d));
    expect(
        "nextn-all-layers",
        &set("qwen35.nextn_predict_layers", Some(Value::U32(5))),
        &["qwen35.nextn_predict_layers", "5 of 5 layers"],
    );
    let heads = |n: usize| {
        let items = vec![Value::U32(4); n];
        Some(Value::Array(Array::new(ValueType::U32, items)))
    };
    for n in [4, 5] {
        let bytes = set("qwen35.attention.head_count", heads(n));
        let name = format!("kolibri-mtp-heads-{n}-{}.gguf", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let loaded = Model::load(&path);
        std::fs::remove_file(&path).ok();
        let model = loaded.unwrap_or_else(|e| panic!("{n} head counts: {e}"));
        assert_eq!((model.hparams.n_layer, model.hparams.n_mtp_layers), (4, 1));
    }
    expect(
        "head-count-entries",
        &set("qwen35.attention.head_count", heads(3)),
        &["qwen35.attention.head_count", "3 entries for 4 layers"],
    );
}

/// A multi-token-prediction block with a tensor missing or mis-shaped: asked for (`--spec mtp`),
/// the load names the tensor; not asked for, the block is never read and the target loads and
/// runs as before.
#[test]
fn a_broken_multi_token_prediction_block_is_named_and_the_target_still_runs() {
    use kolibri::model::{Context, ContextParams, LoadOptions, Logits};
    use std::sync::Arc;

    let mtp = synthetic("qwen35-mtp-tiny");
    let dropped =
        |tensor: &'static str| rewrite(&mtp, None, move |n, d| (n != tensor).then_some(d));
    let reshaped = |tensor: &'static str| {
        rewrite(&mtp, None, move |n, d| {
            Some(if n == tensor { vec![d[0] + 1, d[1]] } else { d })
        })
    };
    let cases = [
        (
            "blk.4.nextn.eh_proj.weight",
            dropped("blk.4.nextn.eh_proj.weight"),
            "missing tensor",
        ),
        (
            "blk.4.nextn.enorm.weight",
            dropped("blk.4.nextn.enorm.weight"),
            "missing tensor",
        ),
        (
            "blk.4.attn_q.weight",
            dropped("blk.4.attn_q.weight"),
            "missing tensor",
        ),
        (
            "blk.4.nextn.eh_proj.weight",
            reshaped("blk.4.nextn.eh_proj.weight"),
            "shape",
        ),
    ];
    for (i, (tensor, bytes, words)) in cases.into_iter().enumerate() {
        let name = format!("kolibri-mtp-broken-{i}-{}.gguf", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let mut asked = LoadOptions {
            mtp: true,
            ..Default::default()
        };
        let refused = Model::load_with(&path, &mut asked)
            .err()
            .map(|e| e.to_string());
        let plain = Model::load(&path);
        std::fs::remove_file(&path).ok();
        let msg = refused.unwrap_or_else(|| panic!("{tensor}: a broken block loaded"));
        assert!(
            msg.contains(tensor) && msg.contains(words),
            "{tensor}: {msg}"
        );
        let model = Arc::new(plain.unwrap_or_else(|e| panic!("{tensor}: the target: {e}")));
        let mut ctx = Context::new(model, &ContextParams::default()).unwrap();
        let logits = ctx.eval(&[1, 2, 3], Logits::Last).unwrap();
        assert!(logits.iter().all(|l| l.is_finite()), "{tensor}");
    }
}

/// A broken or foreign Gemma 4 assistant is refused at load with what is wrong, and its target
/// keeps working.
#[test]
fn broken_assistants_are_named() {
    use kolibri::model::{Assistant, Context, ContextParams, LoadOptions, Logits};
    use std::sync::Arc;
    let target = Model::load(common::synthetic::synthetic_path("gemma4-tiny")).unwrap();
    let assistant = synthetic("gemma4-assistant-tiny");
    let dropped =
        |tensor: &'static str| rewrite(&assistant, None, move |n, d| (n != tensor).then_some(d));
    let key = |k: &'static str, v: Option<Value>| rewrite(&assistant, Some((k, v)), |_, d| Some(d));
    let cases = [
        (
            dropped("nextn.pre_projection.weight"),
            "nextn.pre_projection.weight",
        ),
        (dropped("blk.1.attn_q.weight"), "blk.1.attn_q.weight"),
        (
            key(
                "gemma4-assistant.embedding_length_out",
                Some(Value::U32(96)),
            ),
            "another model",
        ),
        (
            key(
                "gemma4-assistant.attention.key_length",
                Some(Value::U32(32)),
            ),
            "value_length",
        ),
        (key("gemma4-assistant.block_count", None), "block_count"),
        (
            key("general.architecture", Some(Value::String("gemma4".into()))),
            "not an assistant",
        ),
    ];
    for (i, (bytes, words)) in cases.into_iter().enumerate() {
        let name = format!("kolibri-assistant-broken-{i}-{}.gguf", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let refused = Assistant::load(&path, &target, &mut LoadOptions::default());
        std::fs::remove_file(&path).ok();
        let msg = refused.err().map(|e| e.to_string());
        let msg = msg.unwrap_or_else(|| panic!("{words}: a broken assistant loaded"));
        assert!(msg.contains(words), "{words}: {msg}");
    }
    let mut ctx = Context::new(Arc::new(target), &ContextParams::default()).unwrap();
    let logits = ctx.eval(&[2, 3, 4], Logits::Last).unwrap();
    assert!(logits.iter().all(|l| l.is_finite()));
}

#[test]
fn broken_gpt_oss_files_are_named() {
    let oss = synthetic("gpt-oss-tiny");
    for tensor in [
        "blk.1.attn_sinks.weight",
        "blk.0.ffn_gate_inp.bias",
        "blk.2.ffn_down_exps.bias",
        "blk.3.post_attention_norm.weight",
        "blk.1.ffn_up_exps.weight",
    ] {
        let dropped = rewrite(&oss, None, |name, d| (name != tensor).then_some(d));
        expect(tensor, &dropped, &["missing tensor", tensor]);
    }
    // A sink per head and a bias per expert: other shapes are refused by name.
    let reshaped = |tensor: &'static str, dims: Vec<u64>| {
        rewrite(&oss, None, move |name, d| {
            Some(if name == tensor { dims.clone() } else { d })
        })
    };
    expect(
        "sinks-shape",
        &reshaped("blk.0.attn_sinks.weight", vec![5]),
        &["blk.0.attn_sinks.weight"],
    );
    expect(
        "expert-bias-shape",
        &reshaped("blk.1.ffn_gate_exps.bias", vec![64, 7]),
        &["blk.1.ffn_gate_exps.bias"],
    );
    // MXFP4 experts whose stated shape does not match their bytes.
    expect(
        "mxfp4-shape",
        &reshaped("blk.2.ffn_gate_exps.weight", vec![96, 64, 8]),
        &["blk.2.ffn_gate_exps.weight"],
    );
    expect(
        "mxfp4-partial-block",
        &reshaped("blk.3.ffn_up_exps.weight", vec![112, 64, 8]),
        &["blk.3.ffn_up_exps.weight"],
    );
}

#[test]
fn broken_mistral3_files_are_named() {
    let m3 = synthetic("mistral3-tiny");
    let set = |k: &'static str, v: Value| rewrite(&m3, Some((k, Some(v))), |_, d| Some(d));
    expect(
        "nan-temperature",
        &set("mistral3.attention.temperature_scale", Value::F32(f32::NAN)),
        &["mistral3.attention.temperature_scale"],
    );
    expect(
        "negative-beta",
        &set("mistral3.rope.scaling.yarn_beta_fast", Value::F32(-2.0)),
        &["mistral3.rope.scaling.yarn_beta_fast", "-2"],
    );
    expect(
        "inf-log-multiplier",
        &set(
            "mistral3.rope.scaling.yarn_log_multiplier",
            Value::F32(f32::INFINITY),
        ),
        &["mistral3.rope.scaling.yarn_log_multiplier"],
    );
    // A mixture-of-experts file of an architecture Kolibri runs dense: refused by name, not
    // loaded without its experts.
    expect(
        "dense-with-experts",
        &set("mistral3.expert_count", Value::U32(8)),
        &["mistral3.expert_count", "8 experts"],
    );
    let dropped = rewrite(&m3, None, |name, d| {
        (name != "blk.2.attn_k.weight").then_some(d)
    });
    expect(
        "missing-k",
        &dropped,
        &["missing tensor", "blk.2.attn_k.weight"],
    );
}

#[test]
fn broken_gemma4_files_are_named() {
    let g4 = synthetic("gemma4-tiny");
    for tensor in [
        "per_layer_token_embd.weight",
        "per_layer_proj_norm.weight",
        "blk.2.inp_gate.weight",
        "blk.3.attn_k.weight",
        "blk.1.attn_k_norm.weight",
        "blk.4.attn_q_norm.weight",
    ] {
        let dropped = rewrite(&g4, None, |name, d| (name != tensor).then_some(d));
        expect(tensor, &dropped, &["missing tensor", tensor]);
    }
    let reshaped = rewrite(&g4, None, |name, d| {
        Some(match name {
            "blk.0.proj.weight" => vec![16, 128],
            _ => d,
        })
    });
    expect("ple-proj-shape", &reshaped, &["blk.0.proj.weight"]);
    let set = |k: &'static str, v: Value| rewrite(&g4, Some((k, Some(v))), |_, d| Some(d));
    expect(
        "shared-past-layers",
        &set("gemma4.attention.shared_kv_layers", Value::U32(6)),
        &["gemma4.attention.shared_kv_layers", "6 shared layers of 6"],
    );
    // Layers 1-5 sharing: only layer 0 (sliding) keeps a cache, so global layer 1 has none
    // to read.
    expect(
        "shared-without-source",
        &set("gemma4.attention.shared_kv_layers", Value::U32(5)),
        &["gemma4.attention.shared_kv_layers", "layer 1", "global"],
    );
    // Sliding heads of their own size: Gemma 4's values (from keys on some layers) must keep
    // the keys' size there too.
    expect(
        "swa-head-size",
        &set("gemma4.attention.key_length_swa", Value::U32(16)),
        &["gemma4.attention.value_length_swa", "key length 16"],
    );
    // Layer 3 has no attn_v: its values are its keys, which need the keys' size.
    expect(
        "values-from-keys-size",
        &set("gemma4.attention.value_length", Value::U32(32)),
        &["gemma4.attention.value_length", "32"],
    );
    let per_layer = |counts: &[u32]| {
        Value::Array(Array::new(
            ValueType::U32,
            counts.iter().map(|&c| Value::U32(c)).collect(),
        ))
    };
    // Per-layer KV head counts are read; the tensors must then have their shapes.
    expect(
        "head-counts-per-layer",
        &set(
            "gemma4.attention.head_count_kv",
            per_layer(&[1, 2, 2, 2, 2, 2]),
        ),
        &["blk.0.attn_k.weight"],
    );
    expect(
        "head-counts-short",
        &set("gemma4.attention.head_count_kv", per_layer(&[2, 2, 2])),
        &["gemma4.attention.head_count_kv", "3 entries for 6 layers"],
    );
    expect(
        "head-counts-not-dividing",
        &set(
            "gemma4.attention.head_count_kv",
            per_layer(&[2, 2, 3, 2, 2, 2]),
        ),
        &["gemma4.attention.head_count_kv", "layer 2"],
    );
    // Layer 4 reads layer 2's cache, which would hold other heads than it reads.
    expect(
        "shared-heads-differ",
        &set(
            "gemma4.attention.head_count_kv",
            per_layer(&[2, 2, 2, 2, 1, 2]),
        ),
        &["gemma4.attention.shared_kv_layers", "layer 4", "layer 2"],
    );
    let no_pattern = rewrite(
        &g4,
        Some(("gemma4.attention.sliding_window_pattern", None)),
        |_, d| Some(d),
    );
    expect(
        "no-pattern",
        &no_pattern,
        &["gemma4.attention.sliding_window_pattern"],
    );
}

#[test]
fn broken_gemma4_mixtures_are_named() {
    let moe = synthetic("gemma4moe-tiny");
    for tensor in [
        "blk.1.ffn_gate_inp.scale",
        "blk.2.pre_ffw_norm_2.weight",
        "blk.0.post_ffw_norm_1.weight",
        "blk.3.ffn_gate.weight",
    ] {
        let dropped = rewrite(&moe, None, |name, d| (name != tensor).then_some(d));
        expect(tensor, &dropped, &["missing tensor", tensor]);
    }
    // Without the fused gate-up tensor the separate ones are looked for: the error names them.
    let fused = "blk.1.ffn_gate_up_exps.weight";
    let dropped = rewrite(&moe, None, |name, d| (name != fused).then_some(d));
    expect(
        fused,
        &dropped,
        &["missing tensor", "blk.1.ffn_gate_exps.weight"],
    );
    let reshaped = rewrite(&moe, None, |name, d| {
        Some(match name {
            "blk.0.ffn_down_exps.scale" => vec![7],
            _ => d,
        })
    });
    expect(
        "expert-scale-shape",
        &reshaped,
        &["blk.0.ffn_down_exps.scale"],
    );
    let set = |k: &'static str, v: Value| rewrite(&moe, Some((k, Some(v))), |_, d| Some(d));
    expect(
        "expert-count",
        &set("gemma4.expert_count", Value::U32(6)),
        &["expert"],
    );
}
