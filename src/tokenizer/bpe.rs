//! GPT-2 byte-level BPE merging of one pre-tokenized word.
//!
//! Merge parts are interned to integers once at load, so the hot loop hashes `(u32, u32)` pairs
//! instead of strings. Merging uses a linked list of symbols and a min-heap of candidate pairs
//! (lowest rank, then leftmost, as llama.cpp), so a word of n characters costs O(n log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::error::TokenizerError;
use super::fast_hash::{FastMap, IdTable};
use super::merge_table::{Merge, MergeTable};
use super::spm::{ascii_byte_token, hex_byte_token};
use super::vocab::Vocab;
use super::TokenId;
use crate::gguf::GgufFile;

const KEY_MERGES: &str = "tokenizer.ggml.merges";

#[derive(Debug, Default)]
pub(crate) struct BpeMerges {
    /// Interned ids of the single-character parts (the only ones looked up by text).
    part_ids: FastMap<Box<str>, u32>,
    pairs: MergeTable,
}

impl BpeMerges {
    pub fn from_gguf(gguf: &GgufFile) -> Result<BpeMerges, TokenizerError> {
        let values = gguf
            .get(KEY_MERGES)
            .ok_or(TokenizerError::MissingKey(KEY_MERGES))?
            .as_array()
            .ok_or_else(|| TokenizerError::BadKey {
                key: KEY_MERGES,
                reason: "not an array".into(),
            })?;
        let mut lines = Vec::with_capacity(values.len());
        for i in 0..values.len() {
            lines.push(values.str(i).ok_or_else(|| TokenizerError::BadKey {
                key: KEY_MERGES,
                reason: format!("element {i} is not a string"),
            })?);
        }
        Ok(BpeMerges::from_lines(&lines))
    }

    /// Each line is `left right`; its index is its rank. The first occurrence of a pair wins.
    pub fn from_lines(lines: &[&str]) -> BpeMerges {
        let parsed: Vec<Option<(&str, &str)>> = lines.iter().map(|l| split_merge(l)).collect();

        // Intern borrowed parts first; own them only once at the end.
        let mut parts: Vec<&str> = Vec::with_capacity(parsed.len());
        let mut ids = IdTable::with_capacity(parsed.len());
        let mut id_of = |part| {
            ids.find(part, |id| parts[id as usize])
                .unwrap_or_else(|at| {
                    parts.push(part);
                    let id = parts.len() as u32 - 1;
                    ids.fill(at, id, |id| parts[id as usize]);
                    id
                })
        };
        let pair_ids: Vec<Option<(u32, u32)>> = parsed
            .iter()
            .map(|p| p.map(|(l, r)| (id_of(l), id_of(r))))
            .collect();
        let mut joined = String::new();
        let pairs: Vec<(u32, u32, Merge)> = parsed
            .iter()
            .zip(&pair_ids)
            .enumerate()
            .filter_map(|(i, (texts, pair))| Some((i, (texts.as_ref()?, pair.as_ref()?))))
            .map(|(rank, (&(l, r), &(left, right)))| {
                joined.clear();
                joined.push_str(l);
                joined.push_str(r);
                let result = ids.get(&joined, |id| parts[id as usize]);
                let rank = rank as u32;
                (left, right, Merge { rank, result })
            })
            .collect();
        let pairs = MergeTable::new(parts.len(), pairs);
        // A word starts as single characters and merges carry their results' ids, so only
        // single-character parts are ever looked up by text: owning the other ~150k part
        // strings cost a third of the tokenizer's load time.
        let part_ids = parts
            .iter()
            .enumerate()
            .filter(|(_, k)| k.chars().nth(1).is_none())
            .map(|(v, &k)| (k.into(), v as u32))
            .collect();
        BpeMerges { part_ids, pairs }
    }

    fn merge(&self, left: Option<u32>, right: Option<u32>) -> Option<Merge> {
        self.pairs.get(left?, right?)
    }

    /// Merges one word (mapped through the GPT-2 byte table, or raw UTF-8 where the vocabulary
    /// escapes spaces) and appends its tokens.
    pub fn tokenize_word(&self, vocab: &Vocab, word: &str, out: &mut Vec<TokenId>) {
        if word.is_empty() {
            return;
        }
        let newline_run = vocab.whole_newline_runs && word.bytes().all(|b| b == b'\n');
        if vocab.ignore_merges || newline_run {
            if let Some(id) = vocab.text_to_token(word) {
                out.push(id);
                return;
            }
        }
        let mut symbols: Vec<Symbol> = word
            .char_indices()
            .map(|(start, c)| Symbol {
                start,
                len: c.len_utf8(),
                part: self
                    .part_ids
                    .get(&word[start..start + c.len_utf8()])
                    .copied(),
                prev: None,
                next: None,
            })
            .collect();
        for i in 0..symbols.len() {
            symbols[i].prev = i.checked_sub(1);
            symbols[i].next = (i + 1 < symbols.len()).then_some(i + 1);
        }

        let mut heap = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<Reverse<Candidate>>, symbols: &[Symbol], l: usize| {
            let Some(r) = symbols[l].next else { return };
            if let Some(m) = self.merge(symbols[l].part, symbols[r].part) {
                heap.push(Reverse(Candidate {
                    rank: m.rank,
                    left: l,
                    right: r,
                    left_len: symbols[l].len,
                    right_len: symbols[r].len,
                    result: m.result,
                }));
            }
        };
        for i in 0..symbols.len() {
            push(&mut heap, &symbols, i);
        }

        while let Some(Reverse(c)) = heap.pop() {
            let (l, r) = (c.left, c.right);
            // A symbol's text only grows from its start, so equal lengths mean equal texts.
            if symbols[l].len != c.left_len || symbols[r].len != c.right_len {
                continue;
            }
            symbols[l].len += symbols[r].len;
            symbols[l].part = c.result;
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

        for s in symbols.iter().filter(|s| s.len > 0) {
            let text = &word[s.start..s.start + s.len];
            match vocab.text_to_token(text) {
                Some(id) => out.push(id),
                // As llama.cpp: fall back to single-byte tokens (`<0xXX>` where spaces are
                // escaped), dropping bytes without one.
                None if vocab.escaped_spaces => {
                    out.extend(text.bytes().filter_map(|b| hex_byte_token(vocab, b)))
                }
                None => out.extend(text.bytes().filter_map(|b| ascii_byte_token(vocab, b))),
            }
        }
    }
}

/// Splits `left right` after the first character, so a part may itself start with a space;
/// lines without a separator are skipped (llama.cpp would insert an unusable empty pair).
fn split_merge(line: &str) -> Option<(&str, &str)> {
    let first_len = line.chars().next()?.len_utf8();
    let pos = line[first_len..].find(' ')? + first_len;
    Some((&line[..pos], &line[pos + 1..]))
}

struct Symbol {
    start: usize,
    len: usize,
    part: Option<u32>,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Ordered by rank, then leftmost position (the heap is a min-heap via `Reverse`).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    rank: u32,
    left: usize,
    right: usize,
    left_len: usize,
    right_len: usize,
    result: Option<u32>,
}
