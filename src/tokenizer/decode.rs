//! Token ids back to bytes and text, including a streaming decoder that never splits a UTF-8
//! character across its outputs.

use super::byte_map;
use super::spm::SPACE_MARKER;
use super::vocab::{ModelKind, TokenKind, Vocab};
use super::{TokenId, Tokenizer};

/// Bytes one token contributes to output, following llama.cpp's `token_to_piece`.
pub(crate) fn piece_bytes(vocab: &Vocab, id: TokenId, special: bool) -> Vec<u8> {
    let Some(token) = vocab.token(id) else {
        return Vec::new();
    };
    let text = vocab.text(id);
    match token.kind() {
        TokenKind::Control | TokenKind::Unknown if !special => Vec::new(),
        // Special and user-defined tokens are written verbatim, without unescaping.
        TokenKind::Control | TokenKind::Unknown | TokenKind::UserDefined => {
            text.as_bytes().to_vec()
        }
        TokenKind::Normal => match vocab.kind {
            ModelKind::Spm | ModelKind::WordPiece => text.replace(SPACE_MARKER, " ").into_bytes(),
            ModelKind::Bpe if vocab.escaped_spaces => text.replace(SPACE_MARKER, " ").into_bytes(),
            ModelKind::Bpe => {
                let mut out = Vec::with_capacity(text.len());
                byte_map::decode_to_bytes(text, &mut out);
                out
            }
        },
        // `<0xXX>` byte-fallback tokens (SentencePiece, and BPE vocabularies that borrow them).
        TokenKind::Byte => parse_byte_token(text).map(|b| vec![b]).unwrap_or_default(),
        // Unused and undefined tokens print nothing, as in llama.cpp.
        _ => Vec::new(),
    }
}

/// `<0xAB>` -> 0xAB.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// Bytes of the `index`-th token of an output, `started` when earlier tokens wrote text. One
/// leading space comes off at the start: from the first token when the vocabulary adds a
/// space prefix while encoding (llama.cpp's detokenizer does the same); for WordPiece, whose
/// word starts all carry a space, from the first token that writes anything (llama.cpp keeps
/// that space).
pub(crate) fn output_bytes(
    vocab: &Vocab,
    id: TokenId,
    index: usize,
    started: bool,
    special: bool,
) -> Vec<u8> {
    let mut bytes = piece_bytes(vocab, id, special);
    let at_start = match vocab.kind {
        ModelKind::WordPiece => !started,
        ModelKind::Spm | ModelKind::Bpe => index == 0 && vocab.add_space_prefix,
    };
    if at_start && bytes.first() == Some(&b' ') {
        bytes.remove(0);
    }
    bytes
}

/// Feeds token ids one at a time and returns only complete UTF-8 text, holding back the start
/// of a character whose remaining bytes are still to come.
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    pending: Vec<u8>,
    /// Tokens before the next one: those pushed, plus one for a prompt the text continues.
    n_before: usize,
    /// Some token has written text (or a prompt did).
    started: bool,
    /// Control tokens written as text all the same (a reply's reasoning markup).
    shown: Vec<TokenId>,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder for generated text, which continues a prompt: every token is written as
    /// llama.cpp's `token_to_piece` writes it, its leading space kept (`"storm had" + " \"#"`).
    /// Control tokens are hidden.
    pub fn after_prompt(tokenizer: &'a Tokenizer) -> StreamDecoder<'a> {
        StreamDecoder {
            tokenizer,
            pending: Vec::new(),
            n_before: 1,
            started: true,
            shown: Vec::new(),
        }
    }

    /// Writes these control tokens as their text instead of hiding them.
    pub fn showing(mut self, tokens: &[TokenId]) -> StreamDecoder<'a> {
        self.shown = tokens.to_vec();
        self
    }

    /// A decoder for a whole text, as [`Tokenizer::decode`] writes it: the space the encoder
    /// prefixed comes off the first token. Control tokens are hidden.
    pub fn at_text_start(tokenizer: &'a Tokenizer) -> StreamDecoder<'a> {
        StreamDecoder {
            n_before: 0,
            started: false,
            ..StreamDecoder::after_prompt(tokenizer)
        }
    }

    /// Adds one token; returns the text that became complete.
    pub fn push(&mut self, id: TokenId) -> String {
        let vocab = self.tokenizer.vocab();
        let special = self.shown.contains(&id);
        let bytes = output_bytes(vocab, id, self.n_before, self.started, special);
        self.n_before += 1;
        self.started |= !bytes.is_empty();
        self.pending.extend_from_slice(&bytes);
        self.take_complete()
    }

    /// Flushes held-back bytes; an unfinished character becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    fn take_complete(&mut self) -> String {
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        // Invalid bytes can never complete: replace them and go on.
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                        // A truncated character at the end: wait for more bytes.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }
}
