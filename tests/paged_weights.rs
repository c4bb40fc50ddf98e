//! Paged weights: the 1.5B (1066 MiB of weights) under `--mem-budget 512M` streams its
//! layers from the mapped files and generates the same greedy text as with all weights
//! resident, its peak RSS under 600 MiB.

mod common;

use std::process::{Command, Stdio};

/// Runs `kolibri run` with `extra` options; returns its text and peak RSS in KiB.
fn run(cache: &std::path::Path, extra: &[&str]) -> (String, i64) {
    let model = common::model_path("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    let child = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "run",
            "-m",
            model.to_str().unwrap(),
            "-p",
            "def fibonacci(n):",
        ])
        .args([
            "-n", "24", "--temp", "0", "-t", "2", "-ctk", "f16", "-ctv", "f16",
        ])
        .args(extra)
        .env("KOLIBRI_REPACK_CACHE", cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let read = |p: &mut dyn std::io::Read| {
        let mut s = String::new();
        p.read_to_string(&mut s).map(|_| s)
    };
    let err = std::thread::spawn(move || read(&mut stderr));
    let text = read(&mut stdout).unwrap();
    let err = err.join().unwrap().unwrap();
    // Reaped here, not by `Child::wait`, for the child's own peak RSS.
    let mut status = 0;
    // SAFETY: plain FFI calls with valid out-pointers, for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{err}"
    );
    (text, usage.ru_maxrss)
}

#[test]
fn paged_weights_give_the_same_text_in_bounded_memory() {
    let cache = std::env::temp_dir().join(format!("kolibri-paged-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    let (resident, rss_resident) = run(&cache, &[]);
    let (paged, rss_paged) = run(&cache, &["--mem-budget", "512M"]);
    assert_eq!(paged, resident);
    assert!(
        resident.len() > "def fibonacci(n):".len() + 20,
        "{resident:?}"
    );
    assert!(
        rss_paged < 600 << 10,
        "paged peak RSS {} MiB",
        rss_paged >> 10
    );
    assert!(
        rss_resident > 900 << 10,
        "resident peak RSS {} MiB",
        rss_resident >> 10
    );
    std::fs::remove_dir_all(&cache).unwrap();
}
