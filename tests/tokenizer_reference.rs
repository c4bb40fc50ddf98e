//! Checks the tokenizers against llama.cpp's output on the real models.
//!
//! - `tests/data/tokenizer.jsonl`: the shared reference (llama-tokenize on 20 tricky strings).
//! - `tests/data/tokenizer_random.jsonl`: 150 random strings (mixed scripts, digits, combining
//!   marks, odd whitespace, contractions, emoji, control characters and special-token texts),
//!   each with the four flag combinations, tokenized by the same llama.cpp build through
//!   `llama_tokenize` (`add_bos` is its `add_special`).

use std::collections::HashMap;
use std::path::PathBuf;

use kolibri::gguf::GgufFile;
use kolibri::tokenizer::{StreamDecoder, TokenId, Tokenizer};

struct Record {
    model_file: String,
    text: String,
    add_bos: bool,
    parse_special: bool,
    ids: Vec<TokenId>,
}

fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KOLIBRI_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").expect("HOME is not set");
    PathBuf::from(home).join(".cache/kolibri/models")
}

fn load(model_file: &str) -> Tokenizer {
    let path = model_dir().join(model_file);
    assert!(
        path.exists(),
        "model {} is missing: run `scripts/fetch-models.py all` (or set KOLIBRI_MODEL_DIR)",
        path.display()
    );
    let gguf = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&gguf).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const REFERENCE: &str = include_str!("data/tokenizer.jsonl");
const RANDOM: &str = include_str!("data/tokenizer_random.jsonl");

fn records(data: &str) -> Vec<Record> {
    data.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut p = json::Parser::new(line);
            let obj = p
                .object()
                .unwrap_or_else(|e| panic!("bad record {line}: {e}"));
            let str_field = |k: &str| match obj.get(k) {
                Some(json::Value::Str(s)) => s.clone(),
                other => panic!("field {k}: {other:?} in {line}"),
            };
            let bool_field = |k: &str| match obj.get(k) {
                Some(json::Value::Bool(b)) => *b,
                other => panic!("field {k}: {other:?} in {line}"),
            };
            let ids = match obj.get("ids") {
                Some(json::Value::Ints(v)) => v.iter().map(|&i| i as TokenId).collect(),
                other => panic!("field ids: {other:?} in {line}"),
            };
            Record {
                model_file: str_field("model_file"),
                text: str_field("text"),
                add_bos: bool_field("add_bos"),
                parse_special: bool_field("parse_special"),
                ids,
            }
        })
        .collect()
}

/// Encodes every record; returns how many match and a description of each mismatch.
fn check(records: &[Record]) -> (usize, Vec<String>) {
    let mut tokenizers: HashMap<String, Tokenizer> = HashMap::new();
    let mut failures = Vec::new();
    for r in records {
        let tok = tokenizers
            .entry(r.model_file.clone())
            .or_insert_with(|| load(&r.model_file));
        let got = tok.encode(&r.text, r.add_bos, r.parse_special);
        if got != r.ids {
            failures.push(format!(
                "{} {:?} add_bos={} parse_special={}\n  want {:?}\n  got  {:?}",
                r.model_file, r.text, r.add_bos, r.parse_special, r.ids, got
            ));
        }
    }
    (records.len() - failures.len(), failures)
}

#[test]
fn every_reference_record_matches_llama_cpp() {
    let records = records(REFERENCE);
    assert_eq!(records.len(), 80);
    let (passed, failures) = check(&records);
    println!("{passed}/{} reference records match", records.len());
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn random_strings_match_llama_cpp() {
    let records = records(RANDOM);
    assert_eq!(records.len(), 1200);
    let (passed, failures) = check(&records);
    println!("{passed}/{} random records match", records.len());
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn reference_texts_round_trip_through_decode() {
    let mut tokenizers: HashMap<String, Tokenizer> = HashMap::new();
    for r in records(REFERENCE).into_iter().chain(records(RANDOM)) {
        let tok = tokenizers
            .entry(r.model_file.clone())
            .or_insert_with(|| load(&r.model_file));
        // SentencePiece writes spaces as U+2581, so that character itself cannot survive.
        if r.model_file.starts_with("gemma") && r.text.contains('\u{2581}') {
            continue;
        }
        // Re-encode without special parsing so every byte of the text is real text.
        let ids = tok.encode(&r.text, false, false);
        assert_eq!(tok.decode(&ids), r.text, "{}", r.model_file);
        let mut stream = StreamDecoder::at_text_start(tok);
        let mut streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
        streamed.push_str(&stream.finish());
        assert_eq!(streamed, r.text, "streamed, {}", r.model_file);
    }
}

#[test]
fn qwen_round_trips_assorted_strings() {
    let tok = load("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    for text in [
        "Hello, world! It's   fine.\r\n\r\n\tTabbed",
        "emoji 😀👍🏽🇩🇪 and ZWJ 👨‍👩‍👧",
        "e\u{301} a\u{308} combining, \u{a0}nbsp, \u{200b}zwsp, \u{3000}ideographic space",
        "数学: ∑_{i=1}^{n} i² = n(n+1)/2; Ελληνικά; עברית; हिन्दी",
        "    indented code\n\tfn x() -> u8 { 0 }\n",
        "I'M YOU'RE we'Ll 123456789 0.000001",
        "<|im_start|>not parsed<|im_end|>",
    ] {
        let ids = tok.encode(text, false, false);
        assert_eq!(tok.decode(&ids), text);
    }
}

#[test]
fn special_ids_and_flags_match_the_models() {
    let qwen = load("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    assert!(!qwen.add_bos());
    assert_eq!(qwen.eos(), Some(151645));
    for id in [151643, 151645, 151662, 151663, 151664] {
        assert!(qwen.is_eog(id), "{id} {:?}", qwen.token_text(id));
    }
    assert!(!qwen.is_eog(151644) && qwen.is_control(151644));
    assert_eq!(qwen.token_text(151644), Some("<|im_start|>"));
    assert_eq!(qwen.token_bytes(151644, false), b"");
    assert_eq!(qwen.token_bytes(151644, true), b"<|im_start|>");
    assert_eq!(qwen.token_bytes(220, false), b" ");

    let gemma = load("gemma-3-270m-q4_k_m.gguf");
    assert!(gemma.add_bos());
    assert_eq!((gemma.bos(), gemma.eos()), (Some(2), Some(1)));
    assert!(gemma.is_eog(1) && gemma.is_eog(106) && !gemma.is_eog(105));
    assert_eq!(gemma.token_bytes(236743, false), b" ");
    assert_eq!(gemma.n_vocab(), 262144);
}

/// Just enough JSON for the reference records: objects of strings, bools and integer arrays.
mod json {
    use std::collections::HashMap;

    #[derive(Debug)]
    pub enum Value {
        Str(String),
        Bool(bool),
        Ints(Vec<i64>),
    }

    pub struct Parser<'a> {
        s: &'a [u8],
        pos: usize,
    }

    impl<'a> Parser<'a> {
        pub fn new(s: &'a str) -> Parser<'a> {
            Parser {
                s: s.as_bytes(),
                pos: 0,
            }
        }

        fn ws(&mut self) {
            while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
        }

        fn expect(&mut self, c: u8) -> Result<(), String> {
            self.ws();
            if self.s.get(self.pos) == Some(&c) {
                self.pos += 1;
                Ok(())
            } else {
                Err(format!("expected {:?} at {}", c as char, self.pos))
            }
        }

        fn peek(&mut self) -> Option<u8> {
            self.ws();
            self.s.get(self.pos).copied()
        }

        pub fn object(&mut self) -> Result<HashMap<String, Value>, String> {
            let mut map = HashMap::new();
            self.expect(b'{')?;
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(map);
            }
            loop {
                let key = self.string()?;
                self.expect(b':')?;
                let value = self.value()?;
                map.insert(key, value);
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        return Ok(map);
                    }
                    _ => return Err(format!("bad object at {}", self.pos)),
                }
            }
        }

        fn value(&mut self) -> Result<Value, String> {
            match self.peek() {
                Some(b'"') => Ok(Value::Str(self.string()?)),
                Some(b't') => self.word("true", Value::Bool(true)),
                Some(b'f') => self.word("false", Value::Bool(false)),
                Some(b'[') => self.ints().map(Value::Ints),
                _ => Err(format!("unsupported value at {}", self.pos)),
            }
        }

        fn word(&mut self, w: &str, v: Value) -> Result<Value, String> {
            if self.s[self.pos..].starts_with(w.as_bytes()) {
                self.pos += w.len();
                Ok(v)
            } else {
                Err(format!("bad literal at {}", self.pos))
            }
        }

        fn ints(&mut self) -> Result<Vec<i64>, String> {
            self.expect(b'[')?;
            let mut out = Vec::new();
            if self.peek() == Some(b']') {
                self.pos += 1;
                return Ok(out);
            }
            loop {
                self.ws();
                let start = self.pos;
                while self.pos < self.s.len()
                    && (self.s[self.pos].is_ascii_digit() || self.s[self.pos] == b'-')
                {
                    self.pos += 1;
                }
                let n = std::str::from_utf8(&self.s[start..self.pos])
                    .unwrap()
                    .parse()
                    .map_err(|e| format!("bad int at {start}: {e}"))?;
                out.push(n);
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        return Ok(out);
                    }
                    _ => return Err(format!("bad array at {}", self.pos)),
                }
            }
        }

        fn hex4(&mut self) -> Result<u32, String> {
            let h = self
                .s
                .get(self.pos..self.pos + 4)
                .ok_or("short \\u escape")?;
            self.pos += 4;
            u32::from_str_radix(std::str::from_utf8(h).unwrap(), 16).map_err(|e| e.to_string())
        }

        fn string(&mut self) -> Result<String, String> {
            self.expect(b'"')?;
            let mut out: Vec<u8> = Vec::new();
            loop {
                let c = *self.s.get(self.pos).ok_or("unterminated string")?;
                self.pos += 1;
                match c {
                    b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                    b'\\' => {
                        let e = *self.s.get(self.pos).ok_or("bad escape")?;
                        self.pos += 1;
                        let ch = match e {
                            b'n' => '\n',
                            b't' => '\t',
                            b'r' => '\r',
                            b'b' => '\u{8}',
                            b'f' => '\u{c}',
                            b'/' => '/',
                            b'\\' => '\\',
                            b'"' => '"',
                            b'u' => {
                                let mut cp = self.hex4()?;
                                if (0xD800..0xDC00).contains(&cp) {
                                    if !self.s[self.pos..].starts_with(b"\\u") {
                                        return Err("lone surrogate".into());
                                    }
                                    self.pos += 2;
                                    let lo = self.hex4()?;
                                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                }
                                char::from_u32(cp).ok_or("bad code point")?
                            }
                            _ => return Err(format!("bad escape {:?}", e as char)),
                        };
                        out.extend(ch.encode_utf8(&mut [0; 4]).as_bytes());
                    }
                    _ => out.push(c),
                }
            }
        }
    }
}
