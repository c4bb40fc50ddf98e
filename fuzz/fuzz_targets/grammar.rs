//! Any text as a GBNF grammar (translated to llguidance's Lark) and as a JSON schema, compiled
//! against a small vocabulary and run a few steps: an error or a constraint, never a panic.
#![no_main]

use std::sync::OnceLock;

use kolibri::gguf::{GgufFile, GgufWriter, Value, ValueType};
use kolibri::grammar::{gbnf_to_lark, ConstraintSpec, GrammarCompiler};
use kolibri::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

/// A byte-level vocabulary: one token per printable ASCII character, plus an end token.
fn compiler() -> &'static GrammarCompiler {
    static COMPILER: OnceLock<GrammarCompiler> = OnceLock::new();
    COMPILER.get_or_init(|| {
        let mut pieces: Vec<Value> = (0x20u8..0x7f)
            .map(|b| Value::String((b as char).to_string()))
            .collect();
        pieces.push(Value::String("</s>".into()));
        let n = pieces.len();
        let mut types: Vec<Value> = vec![Value::I32(1); n - 1];
        types.push(Value::I32(3));
        let mut w = GgufWriter::new();
        w.metadata("tokenizer.ggml.model", Value::String("llama".into()))
            .metadata(
                "tokenizer.ggml.tokens",
                Value::array(ValueType::String, pieces),
            )
            .metadata(
                "tokenizer.ggml.token_type",
                Value::array(ValueType::I32, types),
            )
            .metadata("tokenizer.ggml.eos_token_id", Value::U32(n as u32 - 1));
        let gguf = GgufFile::from_bytes(w.to_bytes()).expect("a valid vocabulary");
        let tokenizer = Tokenizer::from_gguf(&gguf).expect("a valid vocabulary");
        GrammarCompiler::new(&tokenizer).expect("a compiler")
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = gbnf_to_lark(&text);
    for spec in [
        ConstraintSpec::Gbnf(text.to_string()),
        ConstraintSpec::JsonSchema(text.to_string()),
    ] {
        let Ok(mut constraint) = compiler().compile(&spec) else {
            continue;
        };
        let mut logits = vec![0.0f32; compiler().n_vocab()];
        for _ in 0..4 {
            logits.iter_mut().for_each(|l| *l = 0.0);
            constraint.mask_logits(&mut logits);
            let Some(next) = logits.iter().position(|l| l.is_finite()) else {
                break;
            };
            constraint.commit(next as u32);
        }
    }
});
