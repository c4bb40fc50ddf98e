//! llama.cpp's own tokenizer suite: its `models/ggml-vocab-*.gguf` vocabularies with their
//! `.inp` cases and the token ids llama.cpp gives them (`.out`; no BOS, no special-token
//! parsing, as its test-tokenizer-0 runs them), fetched by `scripts/fetch-models.py vocab`.
//! Every case must be identical for every vocabulary whose tokenizer Kolibri supports; the
//! ones it refuses are listed below, so a vocabulary that stops loading fails too.

mod common;

use kolibri::gguf::GgufFile;
use kolibri::tokenizer::Tokenizer;

/// Vocabularies Kolibri refuses today, with why.
const UNSUPPORTED: &[(&str, &str)] = &[("gemma-4", "tokenizer model")];

const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

#[test]
fn every_supported_vocabulary_tokenizes_like_llama_cpp() {
    let dir = common::model_dir().join("llama-vocab");
    assert!(
        dir.join(".complete").exists(),
        "{} is missing: run `scripts/fetch-models.py vocab` first",
        dir.display()
    );
    let mut vocabs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .filter(|p| p.with_extension("gguf.inp").exists())
        .collect();
    vocabs.sort();
    assert!(vocabs.len() >= 15, "only {} vocabularies", vocabs.len());
    let (mut failures, mut passed) = (Vec::new(), Vec::new());
    for path in &vocabs {
        let file = path.file_name().unwrap().to_string_lossy();
        let name = file
            .trim_start_matches("ggml-vocab-")
            .trim_end_matches(".gguf");
        let gguf = GgufFile::open(path).unwrap();
        let tokenizer = match Tokenizer::from_gguf(&gguf) {
            Ok(t) => t,
            Err(e) if UNSUPPORTED.iter().any(|u| u.0 == name) => {
                eprintln!("{name}: refused as expected ({e})");
                continue;
            }
            Err(e) => {
                failures.push(format!("{name}: refused: {e}"));
                continue;
            }
        };
        let inp = std::fs::read_to_string(path.with_extension("gguf.inp")).unwrap();
        let out = std::fs::read_to_string(path.with_extension("gguf.out")).unwrap();
        let cases: Vec<&str> = inp.split(SEPARATOR).collect();
        let expected: Vec<&str> = out.lines().collect();
        // The file ends with a separator: one empty piece after the last case.
        let cases = &cases[..expected.len().min(cases.len())];
        let mut bad = 0;
        for (text, want) in cases.iter().zip(&expected) {
            let want: Vec<u32> = want
                .split_whitespace()
                .map(|t| t.parse().unwrap())
                .collect();
            let got = tokenizer.encode(text, false, false);
            if got != want {
                bad += 1;
                if bad <= 3 {
                    failures.push(format!("{name}: {text:?}: {got:?} != {want:?}"));
                }
            }
        }
        if bad == 0 {
            passed.push(format!("{name} ({} cases)", cases.len()));
        } else {
            failures.push(format!("{name}: {bad} of {} cases differ", cases.len()));
        }
        if UNSUPPORTED.iter().any(|u| u.0 == name) {
            failures.push(format!("{name} loads now: take it off UNSUPPORTED"));
        }
    }
    eprintln!("identical: {}", passed.join(", "));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
