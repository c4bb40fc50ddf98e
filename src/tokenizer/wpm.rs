//! WordPiece (`bert`) tokenization of one text fragment, as llama.cpp's `llm_tokenizer_wpm`.
//!
//! Text is normalized BERT-style and split into words: whitespace separates words, control
//! characters vanish, accents are stripped (each character replaced by the first character of
//! its NFD, then combining marks dropped) and letters lower-cased, as the metadata asks;
//! punctuation, ASCII symbols and CJK ideographs are words of one character. Each word,
//! prefixed with U+2581, is cut from the left into the longest vocabulary tokens; a word with
//! a position where no token matches becomes one unknown token. There is no limit on word
//! length (Hugging Face's 100-character cut-off is not applied).

use fancy_regex::Regex;

use super::error::TokenizerError;
use super::spm::SPACE_MARKER;
use super::vocab::{get_bool, Vocab};
use super::TokenId;
use crate::gguf::GgufFile;
use unicode_normalization::char::decompose_canonical;

const KEY_LOWERCASE: &str = "tokenizer.ggml.normalizer.lowercase";
const KEY_STRIP_ACCENTS: &str = "tokenizer.ggml.normalizer.strip_accents";

#[derive(Debug)]
pub(crate) struct WordPiece {
    lowercase: bool,
    strip_accents: bool,
    /// Longest token text in bytes: no longer piece of a word can match.
    max_token_len: usize,
    classes: CharClasses,
}

impl WordPiece {
    pub fn from_gguf(gguf: &GgufFile, vocab: &Vocab) -> Result<WordPiece, TokenizerError> {
        // llama.cpp's defaults: lower-case, and strip accents exactly when lower-casing.
        let lowercase = get_bool(gguf, KEY_LOWERCASE)?.unwrap_or(true);
        let strip_accents = get_bool(gguf, KEY_STRIP_ACCENTS)?.unwrap_or(lowercase);
        let max_token_len = (0..vocab.n_vocab() as TokenId)
            .map(|id| vocab.text(id).len())
            .max()
            .unwrap_or(0);
        Ok(WordPiece {
            lowercase,
            strip_accents,
            max_token_len,
            classes: CharClasses::new()?,
        })
    }

    pub fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<TokenId>) {
        for word in self.words(text) {
            self.tokenize_word(vocab, &word, out);
        }
    }

    /// llama.cpp's `preprocess`: the normalized words of `text`, none empty.
    fn words(&self, text: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        for c in text.chars() {
            let c = if self.strip_accents { nfd_first(c) } else { c };
            // Categories are those of the decomposed character, before lower-casing.
            let kind = self.classes.kind(c);
            let dropped = kind == CharKind::Control
                || c == char::REPLACEMENT_CHARACTER
                || (kind == CharKind::Mark && self.strip_accents);
            if kind == CharKind::Space {
                flush(&mut word, &mut words);
                continue;
            }
            if dropped {
                continue;
            }
            let c = if self.lowercase { to_lower(c) } else { c };
            if kind == CharKind::Punctuation || is_cjk_ideograph(c) {
                flush(&mut word, &mut words);
                words.push(c.to_string());
            } else {
                word.push(c);
            }
        }
        flush(&mut word, &mut words);
        words
    }

    /// Longest tokens first over "▁" + `word`; where a position matches no token, the pieces
    /// found so far are dropped and the whole word is the unknown token.
    fn tokenize_word(&self, vocab: &Vocab, word: &str, out: &mut Vec<TokenId>) {
        let word = format!("{SPACE_MARKER}{word}");
        let first = out.len();
        let mut start = 0;
        while start < word.len() {
            // Token texts are whole characters, so only character boundaries can end a match.
            let longest = (start + 1..=word.len().min(start + self.max_token_len))
                .rev()
                .filter(|&end| word.is_char_boundary(end))
                .find_map(|end| vocab.text_to_token(&word[start..end]).map(|id| (id, end)));
            let Some((id, end)) = longest else {
                out.truncate(first);
                break;
            };
            out.push(id);
            start = end;
        }
        if out.len() == first {
            out.extend(vocab.unk);
        }
    }
}

fn flush(word: &mut String, words: &mut Vec<String>) {
    if !word.is_empty() {
        words.push(std::mem::take(word));
    }
}

/// llama.cpp's `unicode_tolower`, UnicodeData's one-to-one mapping. Rust's agrees except
/// where SpecialCasing gives several characters (only U+0130), whose first is that mapping.
fn to_lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// The ideograph ranges llama.cpp (after Hugging Face's BERT) splits off; the gap between
/// U+2B820 and U+2B91F is theirs too.
fn is_cjk_ideograph(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CharKind {
    /// Unicode White_Space (llama.cpp's whitespace set is that property).
    Space,
    /// Cc, Cf or Co; unassigned code points are not controls for llama.cpp.
    Control,
    /// Combining marks: Mn, Mc, Me.
    Mark,
    /// General category P, and the ASCII symbols `$+<=>^`|~`.
    Punctuation,
    Other,
}

/// Character categories from the regex crate's Unicode tables, as the BPE pre-tokenizer uses
/// them; ASCII is answered without a regex.
#[derive(Debug)]
struct CharClasses {
    /// Any of the categories below: most non-ASCII characters are in none, one match each.
    any: Regex,
    punctuation: Regex,
    mark: Regex,
}

impl CharClasses {
    fn new() -> Result<CharClasses, TokenizerError> {
        let compile = |p: &str| {
            Regex::new(p).map_err(|e| TokenizerError::Regex {
                pattern: p.to_string(),
                reason: e.to_string(),
            })
        };
        Ok(CharClasses {
            any: compile(r"[\p{P}\p{M}\p{Cc}\p{Cf}\p{Co}]")?,
            punctuation: compile(r"\p{P}")?,
            mark: compile(r"\p{M}")?,
        })
    }

    fn kind(&self, c: char) -> CharKind {
        if c.is_whitespace() {
            return CharKind::Space;
        }
        if c.is_ascii() {
            return if c.is_ascii_control() {
                CharKind::Control
            } else if c.is_ascii_punctuation() {
                CharKind::Punctuation
            } else {
                CharKind::Other
            };
        }
        let mut buf = [0; 4];
        let s = c.encode_utf8(&mut buf);
        // Only a backtracking limit can fail a match; these patterns never backtrack.
        let is = |re: &Regex| re.is_match(s).unwrap_or(false);
        if !is(&self.any) {
            CharKind::Other
        } else if is(&self.punctuation) {
            CharKind::Punctuation
        } else if is(&self.mark) {
            CharKind::Mark
        } else {
            CharKind::Control
        }
    }
}

/// The first character of `c`'s canonical decomposition (NFD), which is how llama.cpp strips
/// accents for WordPiece (`unicode_cpts_normalize_nfd` keeps only that one): an accented
/// letter becomes its base letter, a Hangul syllable its leading consonant.
pub(super) fn nfd_first(c: char) -> char {
    let mut first = None;
    decompose_canonical(c, |d| {
        first.get_or_insert(d);
    });
    first.unwrap_or(c)
}
