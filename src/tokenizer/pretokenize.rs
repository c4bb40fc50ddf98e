//! Pre-tokenizer: splits text into words with the regex set that `tokenizer.ggml.pre` selects.
//!
//! As in llama.cpp, the regexes apply one after another: each splits every piece produced by
//! the previous one, and text between matches becomes a piece of its own. A regex never sees
//! past its piece, so a lookahead such as `\s+(?!\S)` treats a piece end as end of text.

use std::ops::Range;

use fancy_regex::Regex;

use super::error::TokenizerError;

/// GPT-2's pattern.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// Llama 3's pattern. The original `(?i:'s|...)` is spelled out as llama.cpp does: a
/// case-insensitive match would also accept look-alikes such as U+017F for `s`.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's pattern: Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen3.5's pattern: Qwen2's with combining marks inside letter runs.
const QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Tekken's (Mistral Nemo) pattern: letter runs split at case changes (an upper-case run, then
/// lower-case letters), single digits. Written with lookaheads as llama.cpp does, since its
/// regexes lack the `\p{Lu}`-style classes of the original.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GPT-4o's (o200k: gpt-oss, Llama 4) pattern: letter runs split at case changes as Tekken's,
/// each with an optional English contraction, and digits in threes.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// DeepSeek LLM's pattern set: line breaks, letter runs of the scripts its tokenizer names
/// (spelled out as ranges), ASCII and full-width punctuation runs, trailing spaces, CJK runs,
/// digit runs.
const DEEPSEEK_LLM: &[&str] = &[
    r#"[
]"#,
    r#"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"#,
    r#"\s?[!-/:-~！-／：-～‘-‟　-。]+"#,
    r#"\s+$"#,
    r#"[一-龥ࠀ-一가-퟿]+"#,
    r#"\p{N}+"#,
];

/// DeepSeek Coder's pattern set: line breaks, letter runs, punctuation runs, CJK runs, single
/// digits.
const DEEPSEEK_CODER: &[&str] = &[
    r#"[
]"#,
    r#"\s?\p{L}+"#,
    r#"\s?\p{P}+"#,
    r#"[一-龥ࠀ-一가-퟿]+"#,
    r#"\p{N}"#,
];

/// Regex sets per `tokenizer.ggml.pre` value, mirroring llama.cpp's groups. Names whose
/// vocabularies need more than a regex set (separator tokens, whitespace escaping) are left out
/// so that they fail loudly instead of tokenizing differently.
fn patterns_for(pre: &str) -> Option<&'static [&'static str]> {
    Some(match pre {
        "" | "default" => &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" | "dbrx" | "smaug-bpe" => &[LLAMA3],
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" | "stablelm2" | "hunyuan"
        | "solar-open" => &[QWEN2],
        "qwen35" => &[QWEN35],
        "tekken" => &[TEKKEN],
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => &[GPT4O],
        "deepseek-llm" => DEEPSEEK_LLM,
        // SentencePiece-style BPE: whole lines merge (spaces escaped, see `Vocab`); only line
        // feeds split them.
        "gemma4" | "granite-embed-multi-311m" | "sarvam-moe" => &[r"[^\n]+|\n+"],
        "deepseek-coder" => DEEPSEEK_CODER,
        // "gpt2" is not a llama.cpp name; accepted as an alias of "gpt-2".
        "gpt2" | "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
        | "jina-v2-de" | "a.x-4.0" | "mellum" | "exaone4" | "mpt" | "olmo" | "jais"
        | "trillion" | "granite-docling" => &[GPT2],
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b"
        | "mellum2" => &[r"\p{N}", GPT2],
        "falcon" => &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
        _ => return None,
    })
}

#[derive(Debug)]
pub(crate) struct PreTokenizer {
    regexes: Vec<Regex>,
}

impl PreTokenizer {
    pub fn for_name(pre: &str) -> Result<PreTokenizer, TokenizerError> {
        let patterns = patterns_for(pre)
            .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(pre.to_string()))?;
        Self::from_patterns(patterns)
    }

    pub fn from_patterns(patterns: &[&str]) -> Result<PreTokenizer, TokenizerError> {
        let regexes = patterns
            .iter()
            .map(|p| {
                Regex::new(p).map_err(|e| TokenizerError::Regex {
                    pattern: p.to_string(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(PreTokenizer { regexes })
    }

    /// Splits `text` into consecutive non-empty pieces that together cover it.
    pub fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces: Vec<Range<usize>> = std::iter::once(0..text.len()).collect();
        for re in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for piece in pieces {
                split_piece(re, text, piece, &mut next);
            }
            pieces = next;
        }
        pieces
            .into_iter()
            .filter(|r| !r.is_empty())
            .map(|r| &text[r])
            .collect()
    }
}

fn split_piece(re: &Regex, text: &str, piece: Range<usize>, out: &mut Vec<Range<usize>>) {
    let base = piece.start;
    let hay = &text[piece.clone()];
    let mut covered = 0;
    for m in re.find_iter(hay) {
        // Only a backtracking limit can fail; keep the rest of the piece whole then.
        let Ok(m) = m else { break };
        if m.start() == m.end() {
            continue;
        }
        if m.start() > covered {
            out.push(base + covered..base + m.start());
        }
        out.push(base + m.start()..base + m.end());
        covered = m.end();
    }
    if covered < hay.len() {
        out.push(base + covered..piece.end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: &str, text: &str) -> Vec<String> {
        let p = PreTokenizer::for_name(pre).unwrap();
        p.split(text).into_iter().map(String::from).collect()
    }

    #[test]
    fn qwen2_digits_are_single_and_llama3_groups_three() {
        assert_eq!(split("qwen2", "12345"), ["1", "2", "3", "4", "5"]);
        assert_eq!(split("llama-bpe", "12345"), ["123", "45"]);
        assert_eq!(
            split("gpt-4o", "HelloWorld's 12345"),
            ["Hello", "World's", " ", "123", "45"]
        );
    }

    #[test]
    fn trailing_whitespace_leaves_one_space_for_the_next_word() {
        assert_eq!(split("qwen2", "  leading"), [" ", " leading"]);
        assert_eq!(split("qwen2", "a   "), ["a", "   "]);
        assert_eq!(split("gpt2", "a  b"), ["a", " ", " b"]);
    }

    #[test]
    fn contractions_and_newlines() {
        assert_eq!(split("llama3", "I'M here"), ["I", "'M", " here"]);
        assert_eq!(split("qwen2", "x;\r\n\r\ny"), ["x", ";\r\n\r\n", "y"]);
        assert_eq!(split("qwen2", "a\n\nb"), ["a", "\n\n", "b"]);
    }

    #[test]
    fn default_set_splits_punctuation_first() {
        assert_eq!(split("default", "a.b"), ["a", ".", "b"]);
        assert_eq!(split("default", "1234"), ["123", "4"]);
        assert_eq!(
            split("tekken", "HelloWorld 42"),
            ["Hello", "World", " ", "4", "2"]
        );
        assert_eq!(split("deepseek-coder", "ab12"), ["ab", "1", "2"]);
    }

    #[test]
    fn unknown_pre_is_an_error() {
        assert!(matches!(
            PreTokenizer::for_name("nope"),
            Err(TokenizerError::UnsupportedPreTokenizer(_))
        ));
    }
}
