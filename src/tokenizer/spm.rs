//! SentencePiece-style (`llama`) tokenization of one text fragment.
//!
//! Starts from single characters and repeatedly merges the adjacent pair whose concatenation is
//! the vocabulary token with the highest score (leftmost on ties), as llama.cpp's
//! `llm_tokenizer_spm` does. A character left that is no token is emitted as `<0xXX>` byte
//! tokens. Text is not normalized; spaces become U+2581 before this runs.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;
use super::TokenId;

/// The SentencePiece space marker.
pub(crate) const SPACE_MARKER: &str = "\u{2581}";

/// Replaces spaces with the space marker (llama.cpp escapes only U+0020).
pub(crate) fn escape_spaces(text: &str) -> String {
    text.replace(' ', SPACE_MARKER)
}

pub(crate) fn tokenize(vocab: &Vocab, text: &str, out: &mut Vec<TokenId>) {
    if text.is_empty() {
        return;
    }
    let mut symbols: Vec<Symbol> = text
        .char_indices()
        .map(|(start, c)| Symbol {
            start,
            len: c.len_utf8(),
            prev: None,
            next: None,
        })
        .collect();
    for i in 0..symbols.len() {
        symbols[i].prev = i.checked_sub(1);
        symbols[i].next = (i + 1 < symbols.len()).then_some(i + 1);
    }

    let mut heap = BinaryHeap::new();
    let push = |heap: &mut BinaryHeap<Bigram>, symbols: &[Symbol], l: usize| {
        let Some(r) = symbols[l].next else { return };
        // Adjacent symbols are contiguous, so their concatenation is a slice of `text`.
        let joined = &text[symbols[l].start..symbols[r].start + symbols[r].len];
        if let Some(id) = vocab.text_to_token(joined) {
            heap.push(Bigram {
                score: vocab.score(id),
                left: l,
                right: r,
                size: joined.len(),
            });
        }
    };
    for i in 0..symbols.len() {
        push(&mut heap, &symbols, i);
    }

    while let Some(b) = heap.pop() {
        let (l, r) = (b.left, b.right);
        // Stale when either side was merged away or grew since the pair was queued.
        if symbols[l].len == 0 || symbols[r].len == 0 || symbols[l].len + symbols[r].len != b.size {
            continue;
        }
        symbols[l].len += symbols[r].len;
        symbols[r].len = 0;
        symbols[l].next = symbols[r].next;
        if let Some(n) = symbols[r].next {
            symbols[n].prev = Some(l);
        }
        if let Some(p) = symbols[l].prev {
            push(&mut heap, &symbols, p);
        }
        push(&mut heap, &symbols, l);
    }

    let mut i = Some(0);
    while let Some(idx) = i {
        let s = &symbols[idx];
        let piece = &text[s.start..s.start + s.len];
        // Every merge formed a token, so only unmerged single characters can be missing.
        match vocab.text_to_token(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.bytes().filter_map(|b| byte_token(vocab, b))),
        }
        i = s.next;
    }
}

/// The `<0xXX>` token for a byte, else the one-byte text token, else the unknown token
/// (llama.cpp aborts there; real SentencePiece vocabularies always have byte tokens).
pub(crate) fn byte_token(vocab: &Vocab, b: u8) -> Option<TokenId> {
    hex_byte_token(vocab, b)
        .or_else(|| ascii_byte_token(vocab, b))
        .or(vocab.unk)
}

/// The `<0xXX>` byte-fallback token of `b`, if the vocabulary has one.
pub(crate) fn hex_byte_token(vocab: &Vocab, b: u8) -> Option<TokenId> {
    vocab.text_to_token(&format!("<0x{b:02X}>"))
}

/// The token whose text is `b` alone (only an ASCII byte can be one).
pub(crate) fn ascii_byte_token(vocab: &Vocab, b: u8) -> Option<TokenId> {
    let c = char::from_u32(b as u32).filter(|c| c.is_ascii())?;
    vocab.text_to_token(c.encode_utf8(&mut [0; 4]))
}

struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Max-heap order: higher score first, then the leftmost pair.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}
