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

/// The licence files say what Cargo.toml's `license` says: each SPDX licence it names has its
/// text, and LICENSE names them all.
#[test]
fn licence_files_match_cargo_toml() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let spdx = manifest
        .lines()
        .find_map(|l| l.strip_prefix("license = "))
        .expect("Cargo.toml has a license")
        .trim_matches('"');
    let summary = std::fs::read_to_string(root.join("LICENSE")).unwrap();
    assert!(summary.contains(spdx), "LICENSE states {spdx}");
    for id in spdx.split(" OR ") {
        let (file, title) = match id {
            "MIT" => (
                "LICENSE-MIT",
                "Permission is hereby granted, free of charge",
            ),
            "Apache-2.0" => (
                "LICENSE-APACHE",
                "Apache License\n                        Version 2.0",
            ),
            other => panic!("no licence text known for {other}"),
        };
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(text.contains(title), "{file} holds the {id} text");
        assert!(summary.contains(file), "LICENSE points at {file}");
    }
}
