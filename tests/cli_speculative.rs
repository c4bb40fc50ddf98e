//! `kolibri run --draft MODEL`: the same text as plain greedy decoding, the draft model's
//! prompt reported as prompt processing (`draft prompt:`) apart from generation, and the
//! speculation summary.

mod common;

use std::process::{Command, Output};

const TARGET: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const DRAFT: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const PROMPT: &str =
    "Rename `total` to `sum` and output the code:\ndef add(xs):\n    total = 0\n    \
                      for x in xs:\n        total += x\n    return total\n";

fn run(extra: &[&str]) -> (String, String) {
    let target = common::model_path(TARGET);
    let out: Output = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(["run", "-m", target.to_str().unwrap(), "-p", PROMPT])
        .args(["-n", "24", "--temp", "0", "-t", "2", "--raw"])
        .args(extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8(out.stdout).unwrap(), err)
}

#[test]
fn a_draft_model_gives_the_plain_text_and_reads_the_prompt_first() {
    let draft = common::model_path(DRAFT);
    let (plain, err) = run(&[]);
    assert!(!err.contains("draft prompt:"), "{err}");
    let (fast, err) = run(&["--draft", draft.to_str().unwrap()]);
    assert_eq!(fast, plain);
    assert!(err.contains("draft prompt:"), "{err}");
    let accepted = err
        .lines()
        .find_map(|l| l.strip_prefix("speculation: "))
        .and_then(|l| l.split(" accepted").next())
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(accepted.is_some_and(|n| n > 0), "{err}");
}

/// `kolibri run --spec mtp` (and llama.cpp's `--spec-type draft-mtp`) on a Qwen3.5 file with
/// its multi-token-prediction block: the plain greedy text, the block's prompt read first, the
/// summary, with prompt lookup first too; a model without a block, another value, and a draft
/// model beside the block are refused with the reason.
#[test]
fn the_models_own_block_drafts_the_plain_text() {
    let mtp = common::synthetic::synthetic_path("qwen35-mtp-tiny");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kolibri"))
            .args(["run", "-m", mtp.to_str().unwrap(), "-p", "Once upon a time"])
            .args(["-n", "32", "--temp", "0", "-t", "2", "--raw"])
            .args(extra)
            .output()
            .unwrap()
    };
    let plain = run(&[]);
    assert!(plain.status.success());
    let specs = [
        &["--spec", "mtp"][..],
        &["--spec-type", "draft-mtp"],
        &["--spec", "mtp", "--lookup"],
    ];
    for spec in specs {
        let out = run(spec);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(out.stdout, plain.stdout, "{spec:?}");
        assert!(
            err.contains("draft prompt:") && err.contains("speculation: "),
            "{err}"
        );
    }
    let plain_model = common::synthetic::synthetic_path("qwen35-tiny");
    for (args, words) in [
        (vec!["--spec", "eagle"], "mtp"),
        (
            vec!["--spec", "mtp", "--draft", plain_model.to_str().unwrap()],
            "instead of",
        ),
        (
            vec!["--spec", "mtp", "-m", plain_model.to_str().unwrap()],
            "no multi-token",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(words),
            "{args:?}: {err}"
        );
    }
}
