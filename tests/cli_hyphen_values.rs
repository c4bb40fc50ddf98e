//! Free-text options take values that begin with `-`, as llama-cli does: a prompt that opens
//! with a SQL comment or a negative number, a system prompt, a grammar, a stop string.
//! `--stop` ends the printed text before the stop string, and may be given several times.

mod common;

use std::process::Command;

/// A tiny synthetic model (Qwen's vocabulary): fast to load.
fn model() -> String {
    common::synthetic::synthetic_path("qwen3-tiny")
        .to_string_lossy()
        .into_owned()
}

/// `kolibri run` greedy on `prompt` for `n` tokens with `extra` options.
fn run_output(prompt: &str, n: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "run",
            "-m",
            &model(),
            "-p",
            prompt,
            "-n",
            n,
            "--temp",
            "0",
            "-t",
            "2",
            "--raw",
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// [`run_output`] for 16 tokens, which must succeed: its standard output.
fn run(prompt: &str, extra: &[&str]) -> String {
    let out = run_output(prompt, "16", extra);
    assert!(
        out.status.success(),
        "{prompt:?} {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn prompts_and_stop_strings_may_begin_with_a_hyphen() {
    for prompt in [
        "-- the five customers who spent the most",
        "-5 degrees",
        "-p",
    ] {
        let text = run(prompt, &[]);
        assert!(text.starts_with(prompt), "{text:?}");
        assert!(text.len() > prompt.len() + 1, "nothing generated: {text:?}");
    }
    // Accepted, and a stop string that never appears changes nothing.
    let plain = run("-5 degrees", &[]);
    assert_eq!(run("-5 degrees", &["--stop", "- \u{1}"]), plain);
    assert_eq!(run("-5 degrees", &["--stop=-\u{2}"]), plain);
    // `--stop "- "`: the plain text, ended before any "- ".
    let stopped = run("-5 degrees", &["--stop", "- "]);
    let generated = &plain["-5 degrees".len()..plain.len() - 1];
    let want = &generated[..generated.find("- ").unwrap_or(generated.len())];
    assert_eq!(stopped, format!("-5 degrees{want}\n"));
}

#[test]
fn stop_strings_end_the_text_before_them() {
    let prompt = "The capital of France is";
    let plain = run(prompt, &[]);
    let generated = &plain[prompt.len()..plain.len() - 1];
    let chars: Vec<char> = generated.chars().collect();
    assert!(chars.len() >= 6, "too little generated: {generated:?}");
    // A stop string from the middle of the generated text, and one that never appears.
    let stop: String = chars[3..5].iter().collect();
    let at = generated.find(&stop).unwrap();
    let stopped = run(prompt, &["--stop", "never \u{1}", "--stop", &stop]);
    assert_eq!(stopped, format!("{prompt}{}\n", &generated[..at]));
}

#[test]
fn system_prompts_and_grammars_may_begin_with_a_hyphen() {
    // A grammar whose text begins with '-' (a comment would not do: GBNF comments are '#').
    let out = run_output("Say it:", "4", &["--grammar", "-root ::= \"-\" [0-9]"]);
    let err = String::from_utf8_lossy(&out.stderr);
    // Parsed as the grammar's text (which is then refused as GBNF), not as an option.
    assert!(!err.contains("unexpected argument"), "{err}");
    assert!(!err.contains("Usage:"), "{err}");
    let out = run_output("Say it:", "4", &["--grammar", "root ::= \"-\" [0-9]"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let answer = text.trim_end().strip_prefix("Say it:").unwrap();
    assert!(answer.len() == 2 && answer.starts_with('-'), "{text:?}");

    let mut chat = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "chat",
            "-m",
            &model(),
            "-s",
            "-- be terse",
            "-n",
            "4",
            "--temp",
            "0",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    chat.stdin
        .take()
        .unwrap()
        .write_all(b"hello\n/exit\n")
        .unwrap();
    let out = chat.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
