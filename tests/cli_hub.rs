//! `-hf OWNER/REPO[:QUANT]`: a model by its Hugging Face name, found in a Hugging Face cache
//! laid out as the Python `huggingface_hub` package lays it out (blobs, refs/main, snapshot
//! links), picked as llama.cpp's `-hf` picks (the quant asked for, else Q4_K_M; a split
//! model's every part), and run as `-m` on the same file runs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::synthetic::synthetic_split_parts;

fn kolibri(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(args)
        .env("HF_HOME", home)
        .env_remove("HF_HUB_CACHE")
        .env_remove("HUGGINGFACE_HUB_CACHE")
        .env("KOLIBRI_REPACK_CACHE", "0")
        .output()
        .unwrap()
}

fn text(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn error(out: Output) -> String {
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn hugging_face_names_run_the_cached_file_llama_cpp_would_pick() {
    let home = std::env::temp_dir().join(format!("kolibri-hf-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let gemma = common::model_path("gemma-3-270m-q4_k_m.gguf");
    let coder = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    // Two quants of one repository: gemma is its Q4_K_M, the coder stands in as its Q8_0.
    common::hf_cache_repo(
        &home,
        "google/gemma-3-270m-GGUF",
        &[
            ("README.md", &common::data_path("ppl-text.txt")),
            ("gemma-3-270m-Q8_0.gguf", &coder),
            ("gemma-3-270m-Q4_K_M.gguf", &gemma),
        ],
    );
    let run = |model: &[&str]| {
        let args = [&["run"][..], model, &common::GREEDY_RUN];
        kolibri(&home, &args.concat())
    };
    let by_path = |p: &PathBuf| text(run(&["-m", p.to_str().unwrap()]));
    let (q4, q8) = (by_path(&gemma), by_path(&coder));
    assert_ne!(q4, q8);
    assert_eq!(
        text(run(&["-hf", "google/gemma-3-270m-GGUF"])),
        q4,
        "default: Q4_K_M"
    );
    assert_eq!(text(run(&["-hf", "google/gemma-3-270m-GGUF:q8_0"])), q8);
    assert_eq!(
        text(run(&["--hf-repo", "hf.co/google/gemma-3-270m-GGUF:Q4_K_M"])),
        q4
    );

    // A split model (gguf-py's parts), cached under names without a quant: its first part.
    let parts = synthetic_split_parts("qwen3-tiny");
    let names: Vec<String> = (1..=parts.len())
        .map(|i| format!("tiny-{i:05}-of-{:05}.gguf", parts.len()))
        .collect();
    let files: Vec<(&str, &Path)> = names
        .iter()
        .zip(&parts)
        .map(|(n, p)| (n.as_str(), p.as_path()))
        .collect();
    common::hf_cache_repo(&home, "someone/tiny", &files);
    let single = common::synthetic::synthetic_path("qwen3-tiny");
    assert_eq!(text(run(&["-hf", "someone/tiny"])), by_path(&single));

    for (args, why) in [
        (
            &["-hf", "google/gemma-3-270m-GGUF:Q5_K_M"][..],
            "no GGUF file of quantization Q5_K_M",
        ),
        (&["-hf", "nobody/nothing"], "not in the Hugging Face cache"),
        (&["-hf", "qwen3"], "not a Hugging Face model name"),
        (
            &["-hf", "someone/tiny", "-m", "x.gguf"],
            "give the model once",
        ),
    ] {
        let e = error(run(args));
        assert!(e.contains(why), "{args:?}: {e}");
    }
    std::fs::remove_dir_all(&home).unwrap();
}
