//! `kolibri run --prompt-cache FILE`: the first run evaluates the prompt and saves its state;
//! a second run with the same prompt evaluates nothing and generates the same text; a longer
//! prompt reuses the saved prefix; `--prompt-cache-ro` leaves the file alone; a file from
//! another model is refused with a clear error and kept.

mod common;

use std::path::Path;
use std::process::{Command, Output};

const MODEL: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

fn run(model: &str, prompt: &str, cache: &Path, extra: &[&str]) -> Output {
    let model = common::model_path(model);
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(["run", "-m", model.to_str().unwrap(), "-p", prompt])
        .args([
            "-n", "12", "--temp", "0", "-t", "2", "-ctk", "q8_0", "--raw",
        ])
        .args(["--prompt-cache", cache.to_str().unwrap()])
        .args(extra)
        .env("KOLIBRI_REPACK_CACHE", "0")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> (String, String) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8(out.stdout.clone()).unwrap(), err)
}

#[test]
fn a_saved_prompt_is_reused() {
    let dir = std::env::temp_dir().join(format!("kolibri-prompt-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("prompt.state");
    let prompt = "def quicksort(arr):";

    let (first, err) = ok(&run(MODEL, prompt, &cache, &[]));
    assert!(!err.contains("reused"), "{err}");
    assert!(cache.exists());
    let (second, err) = ok(&run(MODEL, prompt, &cache, &[]));
    assert!(err.contains("all 5 prompt tokens reused"), "{err}");
    assert!(err.contains("/ 0 tokens"), "{err}");
    assert_eq!(second, first);

    // A longer prompt: its saved beginning is reused; read-only leaves the file as it was.
    let saved = std::fs::read(&cache).unwrap();
    let (_, err) = ok(&run(
        MODEL,
        "def quicksort(arr): # in place",
        &cache,
        &["--prompt-cache-ro"],
    ));
    assert!(err.contains("5 of 8 prompt tokens reused"), "{err}");
    assert_eq!(std::fs::read(&cache).unwrap(), saved);

    // Another model's context cannot use it: a clear error, and the file is kept.
    let out = run("gemma-3-270m-q4_k_m.gguf", prompt, &cache, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("saved from model"), "{err}");
    assert_eq!(std::fs::read(&cache).unwrap(), saved);
    std::fs::remove_dir_all(&dir).unwrap();
}
