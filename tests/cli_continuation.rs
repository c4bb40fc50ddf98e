//! Continuation text: `kolibri run` prints what llama.cpp streams after a prompt, byte for
//! byte, on every synthetic architecture (SentencePiece vocabularies with a space prefix,
//! llama-spm and Phi-3's, and BPE ones) and on Gemma 3 270M (SentencePiece without one). A
//! generated token keeps its leading space: only the start of a whole text drops the space the
//! encoder prefixed. Compared up to each case's first close call (top-1/top-2 gap under
//! 0.1 nat), where greedy output may legitimately part. Bytes that never form UTF-8 (random
//! models write some) are U+FFFD in Kolibri's output, so both sides are compared as text
//! with those replaced.

mod common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const CLOSE_CALL_GAP: f64 = 0.1;

/// One prompt and the text llama.cpp continued it with, up to its first close call.
struct Continuation {
    prompt: String,
    n_tokens: usize,
    text: Vec<u8>,
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// The first step whose top two log-probabilities are within the close-call gap.
fn first_close_call<'a>(tops: impl Iterator<Item = (f64, f64)> + 'a) -> Option<usize> {
    tops.enumerate()
        .find(|(_, (a, b))| a - b < CLOSE_CALL_GAP)
        .map(|(i, _)| i)
}

/// The cases of a synthetic model's reference (tests/data/arch).
fn synthetic_cases(doc: &Value) -> Vec<Continuation> {
    let cases = doc["cases"].as_array().unwrap();
    cases
        .iter()
        .map(|c| {
            let steps = c["top_logprobs"].as_array().unwrap();
            let lp = |s: &Value, k: usize| s[k]["logprob"].as_f64().unwrap();
            let n =
                first_close_call(steps.iter().map(|s| (lp(s, 0), lp(s, 1)))).unwrap_or(steps.len());
            let pieces = c["generated_pieces_hex"].as_array().unwrap();
            Continuation {
                prompt: c["prompt"].as_str().unwrap().to_owned(),
                n_tokens: n,
                text: pieces[..n]
                    .iter()
                    .flat_map(|p| hex_bytes(p.as_str().unwrap()))
                    .collect(),
            }
        })
        .collect()
}

/// The cases of a real model's reference (tests/data/greedy-*.json: each step's token text).
fn real_cases(doc: &Value) -> Vec<Continuation> {
    let cases = doc["cases"].as_array().unwrap();
    cases
        .iter()
        .map(|c| {
            let steps = c["steps"].as_array().unwrap();
            let lp = |s: &Value, k: usize| s["top"][k]["logprob"].as_f64().unwrap();
            let n =
                first_close_call(steps.iter().map(|s| (lp(s, 0), lp(s, 1)))).unwrap_or(steps.len());
            let text: String = steps[..n]
                .iter()
                .map(|s| s["token"].as_str().unwrap())
                .collect();
            assert!(c["content"].as_str().unwrap().starts_with(&text));
            Continuation {
                prompt: c["prompt"].as_str().unwrap().to_owned(),
                n_tokens: n,
                text: text.into_bytes(),
            }
        })
        .collect()
}

fn read_json(path: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `kolibri run`'s output for a case; a failure description where it is not the prompt and
/// llama.cpp's text.
fn check(model: &std::path::Path, name: &str, case: &Continuation) -> Option<String> {
    if case.n_tokens == 0 {
        return None;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(["run", "-m", model.to_str().unwrap(), "-p", &case.prompt])
        .args([
            "-n",
            &case.n_tokens.to_string(),
            "--temp",
            "0",
            "-t",
            "2",
            "--raw",
        ])
        .output()
        .unwrap();
    if !out.status.success() {
        return Some(format!(
            "{name}: run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let want = format!("{}{}\n", case.prompt, String::from_utf8_lossy(&case.text));
    let printed = String::from_utf8(out.stdout).expect("run prints UTF-8");
    (printed != want).then(|| {
        format!(
            "{name} {:?}: printed {:?}, llama.cpp {:?}",
            case.prompt,
            printed.get(case.prompt.len()..).unwrap_or(&printed),
            String::from_utf8_lossy(&case.text)
        )
    })
}

#[test]
fn run_prints_llama_cpp_continuations_on_every_synthetic_model() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(common::data_path("arch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in files {
        let doc = read_json(file);
        let name = doc["model"].as_str().unwrap();
        let model = common::model_dir()
            .join("synthetic")
            .join(doc["model_file"].as_str().unwrap());
        for case in synthetic_cases(&doc) {
            failures.extend(check(&model, name, &case));
            checked += usize::from(case.n_tokens > 0);
        }
    }
    assert!(checked >= 20, "only {checked} cases had text to compare");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn run_prints_llama_cpp_continuations_on_gemma3() {
    let doc = read_json(common::data_path("greedy-gemma-3-270m.json"));
    let model = common::model_path(doc["model_file"].as_str().unwrap());
    let failures: Vec<String> = real_cases(&doc)
        .iter()
        .filter_map(|case| check(&model, "gemma-3-270m", case))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
