//! Tokenizers read from GGUF metadata, matching llama.cpp token for token.
//!
//! - `gpt2`: GPT-2 byte-level BPE, with the pre-tokenizer regexes that `tokenizer.ggml.pre`
//!   selects ([`pretokenize`]) and merges ranked by `tokenizer.ggml.merges` ([`bpe`]).
//! - `gemma4` (and the `sarvam-moe` pre-tokenizer): the same merging over raw UTF-8 lines with
//!   spaces written `▁`, bytes without a token as `<0xXX>`.
//! - `llama`: SentencePiece-style merging by token score with `<0xXX>` byte fallback ([`spm`]).
//! - `bert`: WordPiece, BERT-normalized words cut into longest vocabulary matches ([`wpm`]).
//!
//! Special tokens are split out of the text first ([`special`]); decoding lives in [`decode`].

mod bpe;
mod byte_map;
mod decode;
mod error;
mod fast_hash;
pub mod infill;
mod merge_table;
mod pretokenize;
mod special;
mod spm;
mod vocab;
mod wpm;

#[cfg(test)]
mod tests;

pub use decode::StreamDecoder;
pub use error::TokenizerError;
pub use vocab::SpecialIds;

use crate::gguf::GgufFile;
use bpe::BpeMerges;
use pretokenize::PreTokenizer;
use special::Fragment;
use vocab::{ModelKind, TokenKind, Vocab};
use wpm::WordPiece;

pub type TokenId = u32;

/// A tokenizer built from a model's GGUF metadata.
#[derive(Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    algorithm: Algorithm,
}

#[derive(Debug)]
enum Algorithm {
    Spm,
    Bpe {
        merges: BpeMerges,
        pre: PreTokenizer,
    },
    // Boxed: its three regexes would make every variant 400 bytes.
    WordPiece(Box<WordPiece>),
}

impl Tokenizer {
    pub fn from_gguf(gguf: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        // A BPE vocabulary's merge table (150k merges: two thirds of the load time, most of
        // it cache misses) builds on a thread of its own beside the vocabulary maps. The
        // vocabulary's errors are still reported first.
        let bpe = matches!(gguf.get_str(vocab::KEY_MODEL), Some("gpt2" | "gemma4"));
        let (vocab, merges) = std::thread::scope(|s| {
            let merges = bpe.then(|| s.spawn(|| BpeMerges::from_gguf(gguf)));
            let vocab = Vocab::from_gguf(gguf);
            let merges = merges.map(|m| {
                m.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
            (vocab, merges)
        });
        let vocab = vocab?;
        let algorithm = match vocab.kind {
            ModelKind::Spm => Algorithm::Spm,
            ModelKind::Bpe => Algorithm::Bpe {
                merges: match merges {
                    Some(m) => m?,
                    None => BpeMerges::from_gguf(gguf)?,
                },
                pre: PreTokenizer::for_name(&vocab.pre)?,
            },
            ModelKind::WordPiece => {
                Algorithm::WordPiece(Box::new(WordPiece::from_gguf(gguf, &vocab)?))
            }
        };
        Ok(Tokenizer { vocab, algorithm })
    }

    /// llama.cpp's `llama_tokenize(text, add_special, parse_special)`: `add_special` adds BOS
    /// and EOS (WordPiece: [CLS] and [SEP]) where the vocabulary asks for them (a BOS already
    /// at the start of the text is kept, giving two, as llama.cpp does); `parse_special`
    /// recognises control tokens in text.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<TokenId> {
        let fragments = special::partition(&self.vocab, text, parse_special);
        let mut out = Vec::new();
        if add_special && self.vocab.add_bos {
            out.extend(self.vocab.bos);
        }
        match &self.algorithm {
            Algorithm::Spm => self.encode_spm(&fragments, &mut out),
            Algorithm::Bpe { merges, pre } => {
                for f in &fragments {
                    match *f {
                        Fragment::Text(t) if self.vocab.escaped_spaces => {
                            for word in pre.split(&spm::escape_spaces(t)) {
                                merges.tokenize_word(&self.vocab, word, &mut out);
                            }
                        }
                        Fragment::Text(t) => {
                            for word in pre.split(t) {
                                let mapped = byte_map::encode_bytes(word.as_bytes());
                                merges.tokenize_word(&self.vocab, &mapped, &mut out);
                            }
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            Algorithm::WordPiece(wpm) => {
                for f in &fragments {
                    match *f {
                        Fragment::Text(t) => wpm.tokenize(&self.vocab, t, &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && self.vocab.add_eos {
            out.extend(self.vocab.eos);
        }
        if add_special && self.vocab.add_sep {
            out.extend(self.vocab.sep);
        }
        out
    }

    fn encode_spm(&self, fragments: &[Fragment<'_>], out: &mut Vec<TokenId>) {
        // The space prefix goes before text at the start and after every special token.
        let mut after_special = true;
        for f in fragments {
            match *f {
                Fragment::Text(t) => {
                    let prefix = if self.vocab.add_space_prefix && after_special {
                        " "
                    } else {
                        ""
                    };
                    let escaped = spm::escape_spaces(&format!("{prefix}{t}"));
                    spm::tokenize(&self.vocab, &escaped, out);
                    after_special = false;
                }
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
            }
        }
    }

    pub fn n_vocab(&self) -> usize {
        self.vocab.n_vocab()
    }

    /// The vocabulary size `gguf` declares (0 without a token list), read without building
    /// the tokenizer: what [`Tokenizer::n_vocab`] will be if [`Tokenizer::from_gguf`] succeeds.
    pub fn vocab_len(gguf: &GgufFile) -> usize {
        vocab::Vocab::declared_len(gguf)
    }

    pub fn bos(&self) -> Option<TokenId> {
        self.vocab.bos
    }

    pub fn eos(&self) -> Option<TokenId> {
        self.vocab.eos
    }

    /// Whether `encode` with `add_special` puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos && self.vocab.bos.is_some()
    }

    pub fn unk(&self) -> Option<TokenId> {
        self.vocab.unk
    }

    /// Separator (BERT's `[SEP]`).
    pub fn sep(&self) -> Option<TokenId> {
        self.vocab.sep
    }

    /// End of turn, fill-in-the-middle and padding ids.
    pub fn specials(&self) -> SpecialIds {
        self.vocab.specials
    }

    /// Whether `encode` with `add_special` puts EOS last.
    pub fn add_eos(&self) -> bool {
        self.vocab.add_eos && self.vocab.eos.is_some()
    }

    /// Whether `encode` with `add_special` puts SEP last.
    pub fn add_sep(&self) -> bool {
        self.vocab.add_sep && self.vocab.sep.is_some()
    }

    /// The tokenizer family, as `tokenizer.ggml.model` names it: "llama" (SentencePiece),
    /// "gpt2" (BPE, Gemma 4's included) or "bert".
    pub fn model_name(&self) -> &'static str {
        match self.vocab.kind {
            vocab::ModelKind::Spm => "llama",
            vocab::ModelKind::Bpe => "gpt2",
            vocab::ModelKind::WordPiece => "bert",
        }
    }

    /// A token's score (0 without scores or past the end).
    pub fn score(&self, id: TokenId) -> f32 {
        self.vocab.score(id)
    }

    /// A token's GGUF type number (`tokenizer.ggml.token_type`, after llama.cpp's
    /// reclassification) and its left/right strip flags; `None` past the end.
    pub fn token_type(&self, id: TokenId) -> Option<(u8, bool, bool)> {
        let t = self.vocab.token(id)?;
        Some((t.kind() as u8, t.lstrip(), t.rstrip()))
    }

    /// End of generation: EOS, EOT, EOM, FIM pad/repo/separator ids and control tokens whose
    /// text is a known end marker (`<|im_end|>`, `<end_of_turn>`, ...).
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.vocab.eog.binary_search(&id).is_ok()
    }

    /// Tokens sampling must never produce (the file's `tokenizer.ggml.suppress_tokens`), sorted.
    pub fn suppressed(&self) -> &[TokenId] {
        &self.vocab.suppressed
    }

    pub fn is_control(&self, id: TokenId) -> bool {
        self.vocab
            .token(id)
            .is_some_and(|t| t.kind() == TokenKind::Control)
    }

    /// How `other` differs from this vocabulary for drafting (a drafter must propose the same
    /// tokens the target reads): its size, a token's text or end-of-generation flag, or the
    /// BOS token. `None`: they agree token by token.
    pub fn drafting_difference(&self, other: &Tokenizer) -> Option<String> {
        if self.n_vocab() != other.n_vocab() {
            return Some(format!(
                "its vocabulary has {} tokens, the target's {}",
                other.n_vocab(),
                self.n_vocab()
            ));
        }
        for id in 0..self.n_vocab() as TokenId {
            if self.token_text(id) != other.token_text(id) || self.is_eog(id) != other.is_eog(id) {
                return Some(format!(
                    "token {id} is {:?} in the target and {:?} in the drafter",
                    self.token_text(id).unwrap_or(""),
                    other.token_text(id).unwrap_or("")
                ));
            }
        }
        if (self.bos(), self.add_bos()) != (other.bos(), other.add_bos()) {
            return Some("their BOS tokens differ".into());
        }
        None
    }

    /// The raw vocabulary string of a token.
    pub fn token_text(&self, id: TokenId) -> Option<&str> {
        self.vocab.token(id).map(|_| self.vocab.text(id))
    }

    /// Bytes this token contributes to output text; control tokens give nothing unless
    /// `special` is true.
    pub fn token_bytes(&self, id: TokenId, special: bool) -> Vec<u8> {
        decode::piece_bytes(&self.vocab, id, special)
    }

    /// Text of a token sequence, control tokens hidden. Bytes that are not valid UTF-8 become
    /// U+FFFD only after concatenation, so characters split across tokens survive.
    pub fn decode(&self, ids: &[TokenId]) -> String {
        String::from_utf8_lossy(&self.detokenize(ids, false, true)).into_owned()
    }

    /// The bytes of a token sequence (llama.cpp's `llama_detokenize` before its special-token
    /// removal): control tokens shown when `special`; `at_start` when the ids open the text,
    /// so the leading space the encoder prefixed comes off.
    pub fn detokenize(&self, ids: &[TokenId], special: bool, at_start: bool) -> Vec<u8> {
        let mut bytes = Vec::new();
        let first = usize::from(!at_start);
        for (i, &id) in ids.iter().enumerate() {
            let started = !bytes.is_empty() || !at_start;
            bytes.extend(decode::output_bytes(
                &self.vocab,
                id,
                first + i,
                started,
                special,
            ));
        }
        bytes
    }

    /// The token of a line feed, as llama.cpp picks it (before it reads the metadata's ids):
    /// SentencePiece's `<0x0A>` byte token (else a `\n` token), the first token of `"\n"` for
    /// BPE, WordPiece's default padding id 0.
    pub fn newline(&self) -> Option<TokenId> {
        match self.vocab.kind {
            vocab::ModelKind::Spm => self
                .vocab
                .text_to_token("<0x0A>")
                .or_else(|| self.vocab.text_to_token("\n")),
            vocab::ModelKind::Bpe => self.encode("\n", false, false).first().copied(),
            vocab::ModelKind::WordPiece => (self.n_vocab() > 0).then_some(0),
        }
    }

    fn vocab(&self) -> &Vocab {
        &self.vocab
    }
}
