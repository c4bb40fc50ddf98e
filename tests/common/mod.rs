//! Shared helpers for the model-level tests.
#![allow(dead_code)]

pub mod fake_hub;
pub mod server;
pub mod synthetic;

use std::path::PathBuf;

/// Directory of the cached real models (`scripts/fetch-models.py` puts them there).
pub fn model_dir() -> PathBuf {
    match std::env::var_os("KOLIBRI_MODEL_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/kolibri/models"),
    }
}

/// Path of a real model; fails the test (never skips) when it has not been fetched.
pub fn model_path(file: &str) -> PathBuf {
    let p = model_dir().join(file);
    assert!(
        p.exists(),
        "{} is missing: run `scripts/fetch-models.py all` first",
        p.display()
    );
    p
}

pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A folder holding the PyPI package `spec` (imported as `module`), installed into
/// `target/pydeps-MODULE` at the first use: put it on PYTHONPATH.
pub fn python_package(module: &str, spec: &str) -> PathBuf {
    use std::process::Command;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("target/pydeps-{module}"));
    let present = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .env("PYTHONPATH", &dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        let out = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .arg("--target")
            .arg(&dir)
            .arg(spec)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pip install {spec}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir
}

/// A command's stdout; fails the test with its stderr when it did not succeed.
pub fn succeeded(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// `kolibri run`'s options for a short greedy continuation, whose text tests compare.
pub const GREEDY_RUN: [&str; 9] = [
    "--raw",
    "-p",
    "The capital of France is",
    "-n",
    "6",
    "--temp",
    "0",
    "-t",
    "2",
];

/// Threads for model tests: all cores.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
/// The commit the Hugging Face caches of [`hf_cache_repo`] hold.
pub const HF_COMMIT: &str = "3f2a9b0c1d4e5f60718293a4b5c6d7e8f9012345";

/// A cache under `home` holding `files` (repository path, content file) in `OWNER/REPO`'s
/// snapshot of main, each a relative link to its blob as huggingface_hub writes it.
pub fn hf_cache_repo(home: &std::path::Path, repo_id: &str, files: &[(&str, &std::path::Path)]) {
    let repo = home
        .join("hub")
        .join(format!("models--{}", repo_id.replace('/', "--")));
    let snap = repo.join("snapshots").join(HF_COMMIT);
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), HF_COMMIT).unwrap();
    for (i, (path, content)) in files.iter().enumerate() {
        let blob = format!("{i:064x}");
        // The blob is the model file itself (a link here, to spare the copy).
        std::os::unix::fs::symlink(content, repo.join("blobs").join(&blob)).unwrap();
        let link = snap.join(path);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        let up = "../".repeat(2 + path.matches('/').count());
        std::os::unix::fs::symlink(format!("{up}blobs/{blob}"), link).unwrap();
    }
}

pub mod llama_ref;
