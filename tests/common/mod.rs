//! Shared helpers for the model-level tests.
#![allow(dead_code)]

pub mod fake_hub;
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

/// Threads for model tests: all cores.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
pub mod llama_ref;
