//! Model-free tests on tiny vocabularies written as in-memory GGUF files.

use super::*;

const TYPE_U32: u32 = 4;
const TYPE_I32: u32 = 5;
const TYPE_F32: u32 = 6;
const TYPE_BOOL: u32 = 7;
const TYPE_STRING: u32 = 8;
const TYPE_ARRAY: u32 = 9;

enum Meta {
    Str(&'static str),
    U32(u32),
    Bool(bool),
    Strs(Vec<String>),
    F32s(Vec<f32>),
    I32s(Vec<i32>),
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn gguf_bytes(kvs: &[(&str, Meta)]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend((kvs.len() as u64).to_le_bytes());
    for (key, value) in kvs {
        put_str(&mut out, key);
        match value {
            Meta::Str(s) => {
                out.extend(TYPE_STRING.to_le_bytes());
                put_str(&mut out, s);
            }
            Meta::U32(v) => {
                out.extend(TYPE_U32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            Meta::Bool(b) => {
                out.extend(TYPE_BOOL.to_le_bytes());
                out.push(*b as u8);
            }
            Meta::Strs(v) => {
                out.extend(TYPE_ARRAY.to_le_bytes());
                out.extend(TYPE_STRING.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                v.iter().for_each(|s| put_str(&mut out, s));
            }
            Meta::F32s(v) => {
                out.extend(TYPE_ARRAY.to_le_bytes());
                out.extend(TYPE_F32.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                v.iter().for_each(|x| out.extend(x.to_le_bytes()));
            }
            Meta::I32s(v) => {
                out.extend(TYPE_ARRAY.to_le_bytes());
                out.extend(TYPE_I32.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                v.iter().for_each(|x| out.extend(x.to_le_bytes()));
            }
        }
    }
    out.resize(out.len().next_multiple_of(32), 0);
    out
}

fn build(kvs: &[(&str, Meta)]) -> Result<Tokenizer, TokenizerError> {
    let gguf = GgufFile::from_bytes(gguf_bytes(kvs)).expect("valid test GGUF");
    Tokenizer::from_gguf(&gguf)
}

/// A byte-level BPE vocabulary: all 256 byte characters, then `extra` (merged tokens and
/// specials), with `<|endoftext|>` and `<|im_end|>` as control tokens.
fn bpe_tokenizer(merges: &[&str], extra: &[&str]) -> Tokenizer {
    bpe_tokenizer_with_pre("qwen2", merges, extra)
}

fn bpe_tokenizer_with_pre(pre: &'static str, merges: &[&str], extra: &[&str]) -> Tokenizer {
    let mut tokens: Vec<String> = (0..=255u8)
        .map(|b| byte_map::byte_to_char(b).to_string())
        .collect();
    tokens.extend(extra.iter().map(|s| s.to_string()));
    tokens.push("<|endoftext|>".into());
    tokens.push("<|im_end|>".into());
    let n = tokens.len();
    let mut types = vec![1; n];
    types[n - 2] = 3;
    types[n - 1] = 3;
    build(&[
        ("tokenizer.ggml.model", Meta::Str("gpt2")),
        ("tokenizer.ggml.pre", Meta::Str(pre)),
        ("tokenizer.ggml.tokens", Meta::Strs(tokens)),
        ("tokenizer.ggml.token_type", Meta::I32s(types)),
        (
            "tokenizer.ggml.merges",
            Meta::Strs(merges.iter().map(|s| s.to_string()).collect()),
        ),
        ("tokenizer.ggml.eos_token_id", Meta::U32(n as u32 - 2)),
        ("tokenizer.ggml.add_bos_token", Meta::Bool(false)),
    ])
    .unwrap()
}

/// A SentencePiece vocabulary: `<unk>`, `<s>`, `</s>`, 256 byte tokens, then `pieces` with
/// their scores, and a user-defined `<tab>` token.
fn spm_tokenizer(pieces: &[(&str, f32)], add_space_prefix: bool) -> Tokenizer {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0, 0.0, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (p, s) in pieces {
        tokens.push(p.to_string());
        types.push(1);
        scores.push(*s);
    }
    tokens.push("<tab>".into());
    types.push(4);
    scores.push(0.0);
    build(&[
        ("tokenizer.ggml.model", Meta::Str("llama")),
        ("tokenizer.ggml.tokens", Meta::Strs(tokens)),
        ("tokenizer.ggml.scores", Meta::F32s(scores)),
        ("tokenizer.ggml.token_type", Meta::I32s(types)),
        (
            "tokenizer.ggml.add_space_prefix",
            Meta::Bool(add_space_prefix),
        ),
    ])
    .unwrap()
}

fn texts(tok: &Tokenizer, ids: &[TokenId]) -> Vec<String> {
    ids.iter()
        .map(|&id| tok.token_text(id).unwrap().to_string())
        .collect()
}

#[test]
fn bpe_applies_lower_rank_merges_first() {
    let tok = bpe_tokenizer(&["b c", "a b", "a bc"], &["ab", "bc", "abc"]);
    // "b c" outranks "a b", so "abc" forms through "bc".
    assert_eq!(texts(&tok, &tok.encode("abc", false, false)), ["abc"]);
    let tok = bpe_tokenizer(&["b c", "a b", "ab c"], &["ab", "bc", "abc"]);
    // "ab c" exists but "ab" never forms: "bc" was merged first.
    assert_eq!(texts(&tok, &tok.encode("abc", false, false)), ["a", "bc"]);
}

#[test]
fn bpe_breaks_rank_ties_leftmost_first() {
    let tok = bpe_tokenizer(&["a a"], &["aa"]);
    assert_eq!(texts(&tok, &tok.encode("aaa", false, false)), ["aa", "a"]);
    assert_eq!(
        texts(&tok, &tok.encode("aaaaa", false, false)),
        ["aa", "aa", "a"]
    );
}

#[test]
fn llama3_words_that_are_tokens_skip_merging() {
    // Merging "abc" gives "a" + "bc", but llama3-style vocabularies take a whole-word token.
    let extra = ["bc", "abc"];
    let qwen = bpe_tokenizer_with_pre("qwen2", &["b c"], &extra);
    assert_eq!(texts(&qwen, &qwen.encode("abc", false, false)), ["a", "bc"]);
    let llama3 = bpe_tokenizer_with_pre("llama-bpe", &["b c"], &extra);
    assert_eq!(texts(&llama3, &llama3.encode("abc", false, false)), ["abc"]);
}

#[test]
fn end_marker_texts_become_control_and_end_generation() {
    // "<end_of_turn>" typed NORMAL in the file: llama.cpp promotes it by its text.
    let tok = bpe_tokenizer(&[], &["<end_of_turn>"]);
    let id = tok.n_vocab() as TokenId - 3;
    assert_eq!(tok.token_text(id), Some("<end_of_turn>"));
    assert!(tok.is_control(id) && tok.is_eog(id));
    assert_eq!(tok.encode("x<end_of_turn>", false, true)[1], id);
    assert_eq!(tok.decode(&[id]), "");
}

#[test]
fn bpe_handles_long_words() {
    let tok = bpe_tokenizer(&["a a", "aa aa"], &["aa", "aaaa"]);
    let word = "a".repeat(20_001);
    let ids = tok.encode(&word, false, false);
    assert_eq!(ids.len(), 5_001);
    assert_eq!(tok.decode(&ids), word);
}

#[test]
fn bpe_round_trips_assorted_text() {
    let tok = bpe_tokenizer(&["Ġ t", "h e", "Ġt he"], &["Ġt", "he", "Ġthe"]);
    for text in [
        "the cat",
        "  two  spaces  ",
        "line\r\nbreak\n\n",
        "tab\there",
        "café naïve e\u{301}",
        "non\u{a0}breaking zero\u{200b}width",
        "你好，世界！",
        "emoji 😀👍🏽 flags 🇩🇪",
        "I'M can't WE'LL",
        "12345 3.14159",
        "",
    ] {
        let ids = tok.encode(text, false, false);
        assert_eq!(tok.decode(&ids), text, "ids {ids:?}");
    }
}

#[test]
fn special_tokens_split_only_when_parsing_special() {
    let tok = bpe_tokenizer(&[], &[]);
    let eot = tok.eos().unwrap();
    let ids = tok.encode("a<|endoftext|>b", false, true);
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[1], eot);
    let plain = tok.encode("a<|endoftext|>b", false, false);
    assert!(!plain.contains(&eot));
    assert_eq!(tok.decode(&plain), "a<|endoftext|>b");
    // Control tokens are hidden in decoded text unless asked for.
    assert_eq!(tok.decode(&ids), "ab");
    assert_eq!(tok.token_bytes(eot, true), b"<|endoftext|>");
}

#[test]
fn eog_and_control_flags() {
    let tok = bpe_tokenizer(&[], &[]);
    let n = tok.n_vocab() as TokenId;
    let (endoftext, im_end) = (n - 2, n - 1);
    assert!(tok.is_eog(endoftext) && tok.is_eog(im_end));
    assert!(tok.is_control(im_end));
    assert!(!tok.is_eog(b'a' as TokenId) && !tok.is_control(0));
    assert!(!tok.add_bos());
}

#[test]
fn spm_merges_by_score_and_falls_back_to_bytes() {
    let tok = spm_tokenizer(
        &[
            ("a", -1.0),
            ("b", -1.0),
            ("c", -1.0),
            ("ab", -3.0),
            ("bc", -2.0),
        ],
        false,
    );
    assert_eq!(texts(&tok, &tok.encode("abc", false, false)), ["a", "bc"]);
    // "€" (E2 82 AC) is not a piece: byte tokens.
    assert_eq!(
        texts(&tok, &tok.encode("a€", false, false)),
        ["a", "<0xE2>", "<0x82>", "<0xAC>"]
    );
    assert_eq!(tok.decode(&tok.encode("a€", false, false)), "a€");
}

#[test]
fn spm_space_prefix_bos_and_user_defined_tokens() {
    let tok = spm_tokenizer(&[("▁", -1.0), ("a", -1.0), ("▁a", -0.5)], true);
    let ids = tok.encode("a a", true, false);
    assert_eq!(texts(&tok, &ids), ["<s>", "▁a", "▁a"]);
    assert!(tok.add_bos());
    assert_eq!(tok.decode(&ids), " a a");
    assert_eq!(tok.decode(&ids[1..]), "a a");
    // User-defined tokens are split out even without parse_special; the prefix space returns
    // after them.
    let ids = tok.encode("a<tab>a", false, false);
    assert_eq!(texts(&tok, &ids), ["▁a", "<tab>", "▁a"]);
    assert!(tok.is_eog(2) && tok.is_control(1));
}

#[test]
fn stream_decoder_holds_back_split_characters() {
    let tok = spm_tokenizer(&[("a", -1.0)], false);
    let ids = tok.encode("a😀a", false, false);
    assert_eq!(ids.len(), 6);
    let mut stream = StreamDecoder::at_text_start(&tok);
    let outputs: Vec<String> = ids.iter().map(|&id| stream.push(id)).collect();
    assert_eq!(outputs, ["a", "", "", "", "😀", "a"]);
    assert_eq!(stream.finish(), "");

    // An unfinished character at the end comes out as U+FFFD.
    let mut stream = StreamDecoder::at_text_start(&tok);
    assert_eq!(stream.push(ids[1]), "");
    assert_eq!(stream.finish(), "\u{FFFD}");
}

#[test]
fn generated_text_keeps_the_leading_space_a_whole_text_drops() {
    // A vocabulary that prefixes a space: "a b" encodes as "▁a", "▁b".
    let pieces = [
        ("▁a", -1.0),
        ("▁b", -1.0),
        ("▁", -2.0),
        ("a", -3.0),
        ("b", -3.0),
    ];
    let tok = spm_tokenizer(&pieces, true);
    let ids = tok.encode("a b", false, false);
    assert_eq!(texts(&tok, &ids), ["▁a", "▁b"]);
    // As a whole text the prefixed space comes off; after a prompt every token keeps its own,
    // as llama.cpp's token_to_piece writes it.
    assert_eq!(tok.decode(&ids), "a b");
    let mut start = StreamDecoder::at_text_start(&tok);
    let whole: String = ids.iter().map(|&id| start.push(id)).collect();
    assert_eq!(whole, "a b");
    let mut after = StreamDecoder::after_prompt(&tok);
    let continued: String = ids.iter().map(|&id| after.push(id)).collect();
    assert_eq!(continued, " a b");
    // Without a space prefix nothing is dropped either way.
    let plain = spm_tokenizer(&pieces, false);
    let ids = plain.encode(" a", false, false);
    let mut start = StreamDecoder::at_text_start(&plain);
    assert_eq!(
        ids.iter().map(|&id| start.push(id)).collect::<String>(),
        " a"
    );
}

#[test]
fn missing_or_bad_keys_are_named() {
    let err = build(&[("tokenizer.ggml.model", Meta::Str("gpt2"))]).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.tokens"), "{err}");
    let err = build(&[]).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.model"), "{err}");
    let err = build(&[
        ("tokenizer.ggml.model", Meta::Str("gpt2")),
        ("tokenizer.ggml.tokens", Meta::Strs(vec!["a".into()])),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.merges"), "{err}");
    let err = build(&[
        ("tokenizer.ggml.model", Meta::Str("llama")),
        (
            "tokenizer.ggml.tokens",
            Meta::Strs(vec!["a".into(), "b".into()]),
        ),
        ("tokenizer.ggml.scores", Meta::F32s(vec![0.0])),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.scores"), "{err}");
}

/// A WordPiece vocabulary: `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]` (control), then `pieces`, word
/// starts marked with "▁" as llama.cpp's converter writes them.
fn wpm_tokenizer(pieces: &[&str], normalizer: &[(&'static str, bool)]) -> Tokenizer {
    let mut tokens: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
        .map(String::from)
        .into();
    tokens.extend(pieces.iter().map(|p| p.to_string()));
    let mut types = vec![1; tokens.len()];
    types[..4].fill(3);
    let mut kvs = vec![
        ("tokenizer.ggml.model", Meta::Str("bert")),
        ("tokenizer.ggml.tokens", Meta::Strs(tokens)),
        ("tokenizer.ggml.token_type", Meta::I32s(types)),
        ("tokenizer.ggml.unknown_token_id", Meta::U32(1)),
        ("tokenizer.ggml.bos_token_id", Meta::U32(2)),
        ("tokenizer.ggml.seperator_token_id", Meta::U32(3)),
        // Ignored: [CLS] and [SEP] are added whatever the flags say.
        ("tokenizer.ggml.add_bos_token", Meta::Bool(false)),
    ];
    for &(key, on) in normalizer {
        kvs.push((key, Meta::Bool(on)));
    }
    build(&kvs).unwrap()
}

const WPM_PIECES: &[&str] = &[
    "▁un",
    "▁unbeliev",
    "able",
    "believ",
    "▁the",
    "▁a",
    "a",
    "▁ab",
    "bc",
    "▁cafe",
    "▁café",
    "▁i",
    "▁,",
    "▁!",
    "▁$",
    "▁中",
    "▁文",
    "▁x✅",
];

fn wpm_texts(tok: &Tokenizer, text: &str) -> Vec<String> {
    texts(tok, &tok.encode(text, false, false))
}

#[test]
fn wpm_takes_the_longest_piece_first() {
    let tok = wpm_tokenizer(WPM_PIECES, &[]);
    assert_eq!(wpm_texts(&tok, "unbelievable"), ["▁unbeliev", "able"]);
    // Greedy: "▁ab" is taken, "c" then matches nothing, so the word is unknown even though
    // "▁a" + "bc" would cover it; the pieces found before are dropped.
    assert_eq!(wpm_texts(&tok, "abc"), ["[UNK]"]);
    assert_eq!(wpm_texts(&tok, "the unx a"), ["▁the", "[UNK]", "▁a"]);
    // A U+2581 in the text starts a new word-start piece inside the word.
    assert_eq!(wpm_texts(&tok, "a\u{2581}a"), ["▁a", "▁a"]);
}

#[test]
fn wpm_splits_punctuation_ascii_symbols_and_ideographs() {
    let tok = wpm_tokenizer(WPM_PIECES, &[]);
    assert_eq!(
        wpm_texts(&tok, " the,a!\t\n$中文 "),
        ["▁the", "▁,", "▁a", "▁!", "▁$", "▁中", "▁文"]
    );
    // A non-ASCII symbol stays inside its word.
    assert_eq!(wpm_texts(&tok, "x✅"), ["▁x✅"]);
}

#[test]
fn wpm_lowercases_strips_accents_and_drops_controls() {
    let tok = wpm_tokenizer(WPM_PIECES, &[]);
    for text in [
        "CAFÉ",
        "Cafe\u{301}",
        "ca\u{200d}fe",
        "c\u{0}af\u{7f}e\u{FFFD}",
    ] {
        assert_eq!(wpm_texts(&tok, text), ["▁cafe"], "{text:?}");
    }
    // U+0130 lower-cases to "i" alone (llama.cpp's one-to-one mapping).
    assert_eq!(wpm_texts(&tok, "\u{130}"), ["▁i"]);
    assert_eq!(wpm_texts(&tok, "Ä"), ["▁a"]);
    // strip_accents follows lowercase unless given; without lower-casing nothing changes.
    let cased = wpm_tokenizer(
        WPM_PIECES,
        &[("tokenizer.ggml.normalizer.lowercase", false)],
    );
    assert_eq!(wpm_texts(&cased, "CAFÉ café"), ["[UNK]", "▁café"]);
    let keep_accents = wpm_tokenizer(
        WPM_PIECES,
        &[("tokenizer.ggml.normalizer.strip_accents", false)],
    );
    assert_eq!(wpm_texts(&keep_accents, "CAFÉ"), ["▁café"]);
}

#[test]
fn nfd_first_is_the_base_character() {
    for (c, base) in [
        ('é', 'e'),
        ('Ä', 'A'),
        ('ệ', 'e'),
        ('\u{2126}', '\u{3A9}'),
        ('\u{F900}', '\u{8C48}'),
        // Hangul syllables keep only their leading consonant, as in llama.cpp.
        ('한', '\u{1112}'),
        ('a', 'a'),
        ('ǅ', 'ǅ'),
        ('\u{10FFFF}', '\u{10FFFF}'),
    ] {
        assert_eq!(super::wpm::nfd_first(c), base, "{c:?}");
    }
}

#[test]
fn wpm_special_tokens_and_decoding() {
    let tok = wpm_tokenizer(WPM_PIECES, &[]);
    assert!(tok.add_bos() && tok.eos().is_none());
    let ids = tok.encode("The cafe, a!", true, false);
    assert_eq!(
        texts(&tok, &ids),
        ["[CLS]", "▁the", "▁cafe", "▁,", "▁a", "▁!", "[SEP]"]
    );
    assert_eq!(
        texts(&tok, &tok.encode("", true, false)),
        ["[CLS]", "[SEP]"]
    );
    assert!(tok.encode("", false, false).is_empty());
    // Word starts get a space except the first written one; [CLS] and [SEP] are hidden.
    assert_eq!(tok.decode(&ids), "the cafe , a !");
    assert_eq!(tok.decode(&ids[1..3]), "the cafe");
    let unbelievable = tok.encode("unbelievable", false, false);
    assert_eq!(tok.decode(&unbelievable), "unbelievable");
    let mut stream = StreamDecoder::at_text_start(&tok);
    let streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
    assert_eq!(streamed, "the cafe , a !");
    // Control tokens in text are split out only when parsing special tokens.
    let parsed = tok.encode("a[SEP]a", false, true);
    assert_eq!(texts(&tok, &parsed), ["▁a", "[SEP]", "▁a"]);
    assert_eq!(
        wpm_texts(&tok, "a[SEP]a"),
        ["▁a", "[UNK]", "[UNK]", "[UNK]", "▁a"]
    );
}

#[test]
fn wpm_handles_long_words_and_odd_input() {
    let tok = wpm_tokenizer(WPM_PIECES, &[]);
    let word = "a".repeat(50_000);
    let ids = tok.encode(&word, false, false);
    assert_eq!(ids.len(), 50_000);
    assert_eq!(tok.decode(&ids), word);
    assert_eq!(wpm_texts(&tok, &"b".repeat(50_000)), ["[UNK]"]);
    for text in [
        "",
        " ",
        "\u{0}",
        "\u{301}",
        "\u{10FFFF}",
        "\u{2581}",
        "😀\u{200d}😀",
    ] {
        let ids = tok.encode(text, true, true);
        assert!(ids.len() >= 2, "{text:?}");
        tok.decode(&ids);
    }
    // A vocabulary without [UNK] leaves unknown words out rather than failing.
    let no_unk = build(&[
        ("tokenizer.ggml.model", Meta::Str("bert")),
        ("tokenizer.ggml.tokens", Meta::Strs(vec!["▁a".into()])),
    ])
    .unwrap();
    assert_eq!(texts(&no_unk, &no_unk.encode("b a", true, false)), ["▁a"]);
}

/// `tokenizer.ggml.suppress_tokens` (Gemma 4): an INT32 array, kept sorted and in range (out of
/// range ids dropped, as llama.cpp drops them); another type is an error naming the key.
#[test]
fn suppressed_tokens_are_read_in_range() {
    let tokens: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let base = |suppress: Meta| {
        build(&[
            ("tokenizer.ggml.model", Meta::Str("gpt2")),
            ("tokenizer.ggml.tokens", Meta::Strs(tokens.clone())),
            ("tokenizer.ggml.merges", Meta::Strs(Vec::new())),
            ("tokenizer.ggml.suppress_tokens", suppress),
        ])
    };
    let t = base(Meta::I32s(vec![3, -1, 1, 99, 3])).unwrap();
    assert_eq!(t.suppressed(), [1, 3]);
    let err = base(Meta::U32(2)).unwrap_err();
    assert!(
        err.to_string().contains("tokenizer.ggml.suppress_tokens"),
        "{err}"
    );
    let plain = build(&[
        ("tokenizer.ggml.model", Meta::Str("gpt2")),
        ("tokenizer.ggml.tokens", Meta::Strs(tokens.clone())),
        ("tokenizer.ggml.merges", Meta::Strs(Vec::new())),
    ])
    .unwrap();
    assert!(plain.suppressed().is_empty());
}

/// A fill-in-the-middle prompt as llama-server lays it out: the project context (repository
/// and file separators), BOS where the vocabulary adds one, then prefix, typed text, suffix
/// and the middle token; any `n_predict` (even absurd) sizes the context without overflow.
#[test]
fn infill_prompts_are_laid_out_as_llama_server_does() {
    use super::infill::{infill_prompt, missing_fim_tokens, ExtraFile, Infill};
    let fim = [
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        "<|repo_name|>",
        "<|file_sep|>",
    ];
    let tok = bpe_tokenizer(&[], &fim);
    let (pre, suf, mid, rep, sep) = (256, 257, 258, 259, 260);
    let plain = |t: &str| tok.encode(t, false, false);
    let extra = [ExtraFile {
        filename: "a.py".into(),
        text: "x = 1\n".into(),
    }];
    let infill = Infill {
        prefix: "def f():",
        suffix: "\n",
        prompt: "re",
        extra: &extra,
    };
    let mut want = vec![rep];
    want.extend(plain("myproject\n"));
    want.push(sep);
    want.extend(plain("a.py\n"));
    want.extend(plain("x = 1\n"));
    want.push(sep);
    want.extend(plain("filename\n"));
    want.push(pre);
    want.extend(plain("def f():"));
    want.extend(plain("re"));
    want.push(suf);
    want.extend(plain("\n"));
    want.push(mid);
    for n_predict in [None, Some(16)] {
        let got = infill_prompt(&tok, &infill, 4096, n_predict).unwrap();
        assert_eq!(got, want, "{n_predict:?}");
    }
    // The context left after the batch and twice the generation holds the project files: a
    // small context, or a long generation, leaves them out.
    let start = want.iter().position(|&t| t == pre).unwrap();
    for (n_ctx, n_predict) in [
        (2048, Some(0)),
        (4096, Some(usize::MAX / 2)),
        (4096, Some(usize::MAX)),
    ] {
        let got = infill_prompt(&tok, &infill, n_ctx, n_predict).unwrap();
        assert_eq!(got, want[start..], "{n_ctx} {n_predict:?}");
    }
    assert!(missing_fim_tokens(&tok).is_empty());
    let plain_vocab = bpe_tokenizer(&[], &[]);
    assert_eq!(
        missing_fim_tokens(&plain_vocab),
        ["prefix", "suffix", "middle"]
    );
    let err = infill_prompt(&plain_vocab, &infill, 4096, None).unwrap_err();
    assert!(err.contains("prefix, suffix, middle"), "{err}");
}
