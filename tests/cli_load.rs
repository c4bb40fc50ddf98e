//! How the commands bring a model into memory: `--no-mmap` reads it into private memory and
//! generates what the mapped model generates; `--mlock` locks it, or fails with a message that
//! says which limit to raise (no silent fallback).

mod common;

use std::process::Command;

const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";

fn run(extra: &[&str]) -> std::process::Output {
    let model = common::model_path(MODEL);
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "run",
            "-m",
            model.to_str().unwrap(),
            "-p",
            "The capital of France is",
        ])
        .args(["-n", "8", "--temp", "0", "-t", "2", "--raw"])
        .args(extra)
        .env("KOLIBRI_REPACK_CACHE", "0")
        .output()
        .unwrap()
}

fn text(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn no_mmap_and_mlock_generate_what_the_mapped_model_does() {
    let mapped = text(&run(&[]));
    assert!(
        mapped.len() > "The capital of France is".len(),
        "{mapped:?}"
    );
    assert_eq!(text(&run(&["--no-mmap"])), mapped);
    for flags in [&["--mlock"][..], &["--mlock", "--no-mmap"]] {
        let out = run(flags);
        if out.status.success() {
            assert_eq!(text(&out), mapped, "{flags:?}");
        } else {
            // The usual 8 MiB RLIMIT_MEMLOCK cannot hold the model: the error names the limit.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("RLIMIT_MEMLOCK"), "{flags:?}: {err}");
        }
    }
}
