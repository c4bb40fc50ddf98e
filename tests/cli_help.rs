//! Every command answers `--help` (clap's, with each option described) and refuses a
//! misspelt option with a suggestion.

use std::process::Command;

fn kolibri(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn every_command_has_help_and_suggests_options() {
    for cmd in [
        "run",
        "chat",
        "bench",
        "perplexity",
        "tokenize",
        "info",
        "quantize",
        "serve",
        "pull",
    ] {
        let out = kolibri(&[cmd, "--help"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("Usage: kolibri {cmd}")),
            "{cmd}: {text}"
        );
        if cmd != "quantize" && cmd != "pull" {
            assert!(
                text.contains("--model <VALUE>") && text.contains("GGUF model file"),
                "{text}"
            );
        }
    }
    let out = kolibri(&["run", "--modle", "x.gguf"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("'--model'"), "{err}");
    let out = kolibri(&["bench", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(also -ctk)"));
}
