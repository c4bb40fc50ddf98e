//! A file's `tokenizer.ggml.suppress_tokens` (Gemma 4 files carry them) are never generated:
//! `kolibri run` on a copy of a model that suppresses its greedy continuation's first token
//! continues otherwise, and never prints that token.

mod common;

use std::process::Command;
use std::sync::Arc;

use common::synthetic::{rewrite, synthetic, synthetic_path};
use kolibri::gguf::{Array, Value, ValueType};
use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::sampling::argmax;

const PROMPT: &str = "The quick brown fox";

/// `kolibri run` greedy for 8 tokens: its standard output.
fn run(model: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(["run", "-m"])
        .arg(model)
        .args(["-p", PROMPT, "-n", "8", "--temp", "0", "-t", "2", "--raw"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn suppressed_tokens_are_never_generated() {
    let original = synthetic_path("qwen3-tiny");
    let model = Arc::new(Model::load(&original).unwrap());
    assert!(model.tokenizer.suppressed().is_empty());
    let mut ctx = Context::new(Arc::clone(&model), &ContextParams::default()).unwrap();
    let prompt = model.tokenizer.encode(PROMPT, true, false);
    let first = argmax(&ctx.eval(&prompt, Logits::Last).unwrap());
    let piece = model.tokenizer.decode(&[first]);

    let ids = Value::Array(Array::new(
        ValueType::I32,
        vec![Value::I32(first as i32), Value::I32(-5)],
    ));
    let bytes = rewrite(
        &synthetic("qwen3-tiny"),
        Some(("tokenizer.ggml.suppress_tokens", Some(ids))),
        |_, d| Some(d),
    );
    let path = std::env::temp_dir().join(format!("kolibri-suppress-{}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let suppressing = Model::load(&path).unwrap();
    assert_eq!(suppressing.tokenizer.suppressed(), [first]);

    let (plain, suppressed) = (run(&original), run(&path));
    std::fs::remove_file(&path).unwrap();
    let continuation = |out: &str| out.split_once(PROMPT).map(|(_, c)| c.to_owned());
    let plain = continuation(&plain).expect("the prompt echoed");
    let suppressed = continuation(&suppressed).expect("the prompt echoed");
    assert!(plain.starts_with(&piece), "{plain:?} starts with {piece:?}");
    assert!(
        !suppressed.starts_with(&piece),
        "{suppressed:?} starts with the suppressed {piece:?}"
    );
}
