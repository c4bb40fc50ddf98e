//! Splitting text on special tokens before the model tokenizer runs (llama.cpp's
//! `tokenizer_st_partition`).
//!
//! Special tokens are tried longest first; each one splits every remaining text fragment at
//! all its occurrences, left to right. User-defined tokens are always split out; control and
//! unknown tokens only when `parse_special` is on.

use super::vocab::{TokenKind, Vocab};
use super::TokenId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment<'t> {
    Text(&'t str),
    Token(TokenId),
}

pub(crate) fn partition<'t>(
    vocab: &Vocab,
    text: &'t str,
    parse_special: bool,
) -> Vec<Fragment<'t>> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut fragments = vec![Fragment::Text(text)];
    for &id in &vocab.special_by_len {
        let token = vocab.tokens[id as usize];
        if !parse_special && matches!(token.kind(), TokenKind::Control | TokenKind::Unknown) {
            continue;
        }
        let needle = vocab.text(id);
        // Most special tokens never occur; skip the rebuild for them.
        let occurs = fragments
            .iter()
            .any(|f| matches!(f, Fragment::Text(t) if t.contains(needle)));
        if !occurs {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len() + 2);
        for f in fragments {
            match f {
                Fragment::Text(t) => {
                    split_text(t, needle, id, token.lstrip(), token.rstrip(), &mut next)
                }
                other => next.push(other),
            }
        }
        fragments = next;
    }
    fragments
}

fn split_text<'t>(
    mut text: &'t str,
    needle: &str,
    id: TokenId,
    lstrip: bool,
    rstrip: bool,
    out: &mut Vec<Fragment<'t>>,
) {
    while let Some(pos) = text.find(needle) {
        let mut left = &text[..pos];
        if lstrip {
            left = left.trim_end_matches(is_c_space);
        }
        if !left.is_empty() {
            out.push(Fragment::Text(left));
        }
        out.push(Fragment::Token(id));
        text = &text[pos + needle.len()..];
        if rstrip {
            text = text.trim_start_matches(is_c_space);
        }
    }
    if !text.is_empty() {
        out.push(Fragment::Text(text));
    }
}

/// C's `isspace` in the "C" locale, which llama.cpp uses for stripping.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}
