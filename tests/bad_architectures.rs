//! Architecture files with a required tensor missing or mis-shaped, or with expert counts that
//! contradict each other or the tensors, get an error that names the problem — never a panic.
//! Built from the synthetic models of scripts/make-synthetic-models.py by rewriting one key or
//! tensor.

mod common;

use kolibri::gguf::{GgufFile, GgufWriter, Value};
use kolibri::model::Model;

fn synthetic(name: &str) -> GgufFile {
    let dir = common::model_dir().join("synthetic");
    let file = std::fs::read_dir(&dir)
        .ok()
        .and_then(|d| {
            d.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{name}-v"))
            })
        })
        .unwrap_or_else(|| panic!("{name} is missing: run `scripts/make-synthetic-models.py`"));
    GgufFile::open(file).unwrap()
}

/// `src` with key `key` set to `value` (removed when `None`) and each tensor passed through
/// `tensor` (dropped when it returns `None`; it may change the dims).
fn rewrite(
    src: &GgufFile,
    key: Option<(&str, Option<Value>)>,
    tensor: impl Fn(&str, Vec<u64>) -> Option<Vec<u64>>,
) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata() {
        match key {
            Some((name, _)) if name == k => {}
            _ => {
                w.metadata(k, v.clone());
            }
        }
    }
    if let Some((name, Some(v))) = key.clone() {
        w.metadata(name, v);
    }
    for t in src.tensors() {
        if let Some(dims) = tensor(&t.name, t.dims.clone()) {
            w.tensor(&t.name, &dims, t.ggml_type, src.tensor_data(t).to_vec());
        }
    }
    w.to_bytes()
}

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
