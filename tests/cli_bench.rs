//! `kolibri bench` at depth and with quantized KV caches: a row per (depth, test) naming both,
//! and bad cache types or depths refused with a message; the speculative mode against plain
//! decoding.

mod common;

use std::process::Command;

const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";

fn bench(args: &[&str]) -> std::process::Output {
    let model = common::model_path(MODEL);
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(["bench", "-m", model.to_str().unwrap(), "-r", "1", "-t", "2"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn rows_name_their_depth_and_cache_types() {
    let out = bench(&[
        "-p", "16", "-n", "4", "-d", "0,40", "-ctk", "q8_0", "-ctv", "f16,q4_0", "-o", "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<(String, String, u64, String)> = rows
        .iter()
        .map(|r| {
            assert!(r["avg_ts"].as_f64().unwrap() > 0.0);
            (
                r["type_k"].as_str().unwrap().to_owned(),
                r["type_v"].as_str().unwrap().to_owned(),
                r["n_depth"].as_u64().unwrap(),
                r["test"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for tv in ["f16", "q4_0"] {
        for depth in [0, 40] {
            for test in ["pp16", "tg4"] {
                want.push(("q8_0".to_owned(), tv.to_owned(), depth, test.to_owned()));
            }
        }
    }
    assert_eq!(keys, want);
}

#[test]
fn bad_cache_types_and_depths_are_refused() {
    let out = bench(&["-ctk", "q3_k"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("q3_k") && err.contains("q8_0"), "{err}");
    // Depth plus test past the trained context (32768).
    let out = bench(&["-d", "40000", "-p", "16", "-n", "0"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("40016") && err.contains("trained"), "{err}");
}

#[test]
fn speculative_mode_compares_with_plain_decoding() {
    // A prompt that repeats itself, so prompt lookup has something to find.
    let text = "fn add(a: i32, b: i32) -> i32 { a + b }\n".repeat(6);
    let file = std::env::temp_dir().join(format!("kolibri-bench-spec-{}.txt", std::process::id()));
    std::fs::write(&file, &text).unwrap();
    let out = bench(&["--lookup", "-f", file.to_str().unwrap(), "-n", "24"]);
    std::fs::remove_file(&file).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.contains("| lookup |"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    // | model | mode | threads | prompt | tg | plain | spec | speed-up | accepted | acc/pass | tok/pass | same |
    assert_eq!(cells[5], "24", "{row}");
    let tokens_per_pass: f64 = cells[11].parse().unwrap();
    assert!(tokens_per_pass >= 1.0, "{row}");
    assert_eq!(cells[12], "yes", "{row}");

    // Random tokens never speculate: a real prompt is required.
    let out = bench(&["--lookup", "-n", "8"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-f FILE"));
}

/// On a hybrid model each run rewinds to the depth further back than its recurrent state's
/// per-token snapshots reach (a 100-token prompt test): bench evaluates again what the state
/// cannot keep, untimed, and every test runs (none overflows the context sized for it).
#[test]
fn hybrid_models_are_measured_at_depth() {
    let model = common::synthetic::synthetic_path("qwen35-tiny");
    let out = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(["bench", "-m", model.to_str().unwrap(), "-r", "2", "-t", "2"])
        .args(["-p", "100", "-n", "50", "-d", "0,200", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let tests: Vec<(u64, &str)> = (rows.iter())
        .map(|r| (r["n_depth"].as_u64().unwrap(), r["test"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tests,
        [(0, "pp100"), (0, "tg50"), (200, "pp100"), (200, "tg50")]
    );
}
