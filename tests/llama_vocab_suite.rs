//! llama.cpp's own tokenizer suite: its `models/ggml-vocab-*.gguf` vocabularies with their
//! `.inp` cases and the token ids llama.cpp gives them (`.out`; no BOS, no special-token
//! parsing, as its test-tokenizer-0 runs them), fetched by `scripts/fetch-models.py vocab`.
//! Every case must be identical for every vocabulary whose tokenizer Kolibri supports; the
//! ones it refuses are listed below, so a vocabulary that stops loading fails too.

mod common;

use kolibri::gguf::GgufFile;
use kolibri::tokenizer::Tokenizer;
use sha2::{Digest, Sha256};

/// Vocabularies Kolibri refuses today, with why.
const UNSUPPORTED: &[(&str, &str)] = &[];

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

/// What llama.cpp's C API says about a vocabulary beyond its cases (recorded by
/// scripts/record-vocab-reference.py into tests/data/vocab/<name>.json): special ids and
/// flags, which ids end generation or are control tokens, every token's piece (by digest) and
/// texts tokenized with special tokens parsed.
#[test]
fn vocabulary_roles_and_pieces_match_llama_cpp() {
    let dir = common::model_dir().join("llama-vocab");
    let refs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vocab");
    let mut checked = 0;
    for entry in std::fs::read_dir(&refs).unwrap() {
        let path = entry.unwrap().path();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = doc["vocab"].as_str().unwrap();
        let gguf = GgufFile::open(dir.join(format!("ggml-vocab-{name}.gguf"))).unwrap();
        let t = Tokenizer::from_gguf(&gguf).unwrap();
        let id = |k: &str| doc[k].as_u64().map(|v| v as u32);
        let ids = |v: &serde_json::Value| -> Vec<u32> {
            let items = v.as_array().unwrap();
            items.iter().map(|x| x.as_u64().unwrap() as u32).collect()
        };
        assert_eq!(t.bos(), id("bos"), "{name}: BOS");
        assert_eq!(t.eos(), id("eos"), "{name}: EOS");
        assert_eq!(t.newline(), id("newline"), "{name}: line feed");
        assert_eq!(t.add_bos(), doc["add_bos"].as_bool().unwrap(), "{name}");
        let all = 0..t.n_vocab() as u32;
        let eog: Vec<u32> = all.clone().filter(|&i| t.is_eog(i)).collect();
        assert_eq!(eog, ids(&doc["eog"]), "{name}: end-of-generation ids");
        let control: Vec<u32> = all.clone().filter(|&i| t.is_control(i)).collect();
        assert_eq!(control, ids(&doc["control"]), "{name}: control ids");
        let hex = |b: Vec<u8>| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let mut pieces = String::new();
        for i in all {
            let (plain, special) = (hex(t.token_bytes(i, false)), hex(t.token_bytes(i, true)));
            pieces.push_str(&format!("{plain}- {special}-\n"));
        }
        let digest: String = Sha256::digest(pieces.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            digest,
            doc["pieces_sha256"].as_str().unwrap(),
            "{name}: pieces"
        );
        for case in doc["texts"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            assert_eq!(
                t.encode(text, true, true),
                ids(&case["ids"]),
                "{name}: {text:?}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 1, "no references in {}", refs.display());
}
