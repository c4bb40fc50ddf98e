//! A vocabulary built from fuzzed bytes (any of the three algorithms, fuzzed pieces, scores,
//! token types and merges), then fuzzed text encoded and decoded: an error or a result, never
//! a panic, and every id the encoder returns is in the vocabulary.
#![no_main]

use kolibri::gguf::{GgufFile, GgufWriter, Value, ValueType};
use kolibri::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

fn strings(items: &[String]) -> Value {
    Value::array(
        ValueType::String,
        items.iter().map(|s| Value::String(s.clone())).collect(),
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    // Pieces up to the first 0xFE; the rest is the text to encode.
    let split = rest.iter().position(|&b| b == 0xFE).unwrap_or(rest.len());
    let (vocab_bytes, text) = (&rest[..split], rest.get(split + 1..).unwrap_or_default());
    let mut pieces: Vec<String> = vocab_bytes
        .split(|&b| b == 0xFF)
        .take(256)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    if pieces.is_empty() {
        pieces.push("a".into());
    }
    let model = ["llama", "gpt2", "bert"][head as usize % 3];
    let pre = ["", "default", "llama3", "qwen2", "gpt-2"][(head as usize / 3) % 5];
    let n = pieces.len();
    let mut w = GgufWriter::new();
    w.metadata("tokenizer.ggml.model", Value::String(model.into()))
        .metadata("tokenizer.ggml.tokens", strings(&pieces))
        .metadata(
            "tokenizer.ggml.scores",
            Value::array(
                ValueType::F32,
                (0..n).map(|i| Value::F32(-(i as f32))).collect(),
            ),
        )
        .metadata(
            "tokenizer.ggml.token_type",
            Value::array(
                ValueType::I32,
                pieces
                    .iter()
                    .map(|p| Value::I32(p.len() as i32 % 7))
                    .collect(),
            ),
        )
        .metadata(
            "tokenizer.ggml.bos_token_id",
            Value::U32(head as u32 % n as u32),
        );
    if !pre.is_empty() {
        w.metadata("tokenizer.ggml.pre", Value::String(pre.into()));
    }
    if model == "gpt2" {
        let merges: Vec<String> = pieces
            .windows(2)
            .map(|w| format!("{} {}", w[0], w[1]))
            .collect();
        w.metadata("tokenizer.ggml.merges", strings(&merges));
    }
    let Ok(gguf) = GgufFile::from_bytes(w.to_bytes()) else {
        return;
    };
    let Ok(tokenizer) = Tokenizer::from_gguf(&gguf) else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    for (add_special, parse_special) in [(false, false), (true, true)] {
        let ids = tokenizer.encode(&text, add_special, parse_special);
        assert!(ids.iter().all(|&id| (id as usize) < tokenizer.n_vocab()));
        let _ = tokenizer.decode(&ids);
    }
});
