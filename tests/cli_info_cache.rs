//! `kolibri info MODEL` leads with the model's facts (the kernel plans behind `--plans`), and
//! `kolibri cache list|clear` manages the repack cache, which every path to one model shares.

mod common;

use std::process::{Command, Output};

fn kolibri(args: &[&str], cache: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(args)
        .env("KOLIBRI_REPACK_CACHE", cache)
        .output()
        .unwrap()
}

#[test]
fn info_leads_with_the_models_facts() {
    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let m = model.to_str().unwrap();
    let off = std::path::Path::new("0");
    let text = common::succeeded(&kolibri(&["info", m], off));
    for fact in [
        "architecture   qwen2, 24 layers (24 attention)",
        "parameters     ",
        ", Q4_K_M",
        "Q5_0 ",
        "context        32768 tokens (trained)",
        "chat template  yes",
        "capabilities   completion, tools",
    ] {
        assert!(text.contains(fact), "{fact}: {text}");
    }
    assert!(!text.contains("matmul plans"), "{text}");
    let plans = common::succeeded(&kolibri(&["info", "-m", m, "--plans"], off));
    assert!(plans.contains("matmul plans") && plans.contains("kernels per weight type"));
    let hybrid = common::synthetic::synthetic_path("qwen35-tiny");
    let text = common::succeeded(&kolibri(&["info", hybrid.to_str().unwrap()], off));
    assert!(
        text.contains("gated delta net") && text.contains("recurrent state"),
        "{text}"
    );
    // Its multi-token-prediction block is counted apart from the trunk.
    let mtp = common::synthetic::synthetic_path("qwen35-mtp-tiny");
    let text = common::succeeded(&kolibri(&["info", mtp.to_str().unwrap()], off));
    assert!(
        text.contains("4 layers (1 attention, 3 gated delta net) + 1 multi-token-prediction")
            && text.contains("which adds 0.5 MiB of weights and 0.2 KiB of KV cache per token")
            && text.contains("capabilities   completion, mtp"),
        "{text}"
    );
}

#[test]
fn the_cache_holds_one_file_per_model_and_clears() {
    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let dir = std::env::temp_dir().join(format!("kolibri-cache-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let copy = dir.join("renamed.gguf");
    std::fs::copy(&model, &copy).unwrap();
    let run = |m: &std::path::Path| {
        let args = [
            "run",
            "--raw",
            m.to_str().unwrap(),
            "-p",
            "Hi",
            "-n",
            "1",
            "-t",
            "2",
        ];
        common::succeeded(&kolibri(&args, &cache));
    };
    run(&model);
    run(&copy);
    let list = common::succeeded(&kolibri(&["cache", "list"], &cache));
    assert!(
        list.contains("(1 files)"),
        "one file for both paths: {list}"
    );
    assert!(
        list.contains("qwen2.5-coder-0.5b-instruct-q4_k_m"),
        "{list}"
    );
    std::fs::write(cache.join("notes.txt"), "not the cache's").unwrap();
    let cleared = common::succeeded(&kolibri(&["cache", "clear"], &cache));
    assert!(cleared.contains("removed 1 files"), "{cleared}");
    let left: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "other files stay");
    let bad = kolibri(&["cache", "purge"], &cache);
    assert!(!bad.status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}
