//! Prompt lookup: the tokens that followed the latest earlier occurrence of the text's last
//! n tokens (n from `ngram_max` down to `ngram_min`) are proposed as the continuation.

use std::collections::HashMap;

use super::Drafter;
use crate::model::ModelError;
use crate::tokenizer::TokenId;

/// Drafts from the sequence's own history (prompt and generated text), kept in an index of
/// its n-grams that grows with the history, so a lookup costs O(ngram_max), not a scan.
pub struct LookupDrafter {
    ngram_min: usize,
    ngram_max: usize,
    /// The history indexed so far.
    history: Vec<TokenId>,
    /// (n-gram hash) → where the latest indexed occurrence of that n-gram ends, for n-grams
    /// whose following token is known.
    index: HashMap<u64, u32>,
}

impl LookupDrafter {
    /// N-grams of `ngram_min..=ngram_max` tokens (clamped to 1..=16) are looked up.
    pub fn new(ngram_min: usize, ngram_max: usize) -> LookupDrafter {
        let ngram_max = ngram_max.clamp(1, 16);
        LookupDrafter {
            ngram_min: ngram_min.clamp(1, ngram_max),
            ngram_max,
            history: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Brings the index in line with `history`: appended tokens are indexed; a history that
    /// is not a continuation of the indexed one (another text) is indexed from scratch.
    fn sync(&mut self, history: &[TokenId]) {
        if !history.starts_with(&self.history) {
            self.history.clear();
            self.index.clear();
        }
        let old = self.history.len();
        self.history.extend_from_slice(&history[old..]);
        // An n-gram ending at `end` is indexed once the token at `end` (its continuation)
        // exists.
        for end in old.max(1)..self.history.len() {
            for n in self.ngram_min..=self.ngram_max.min(end) {
                let key = ngram_key(&self.history[end - n..end]);
                self.index.insert(key, end as u32);
            }
        }
    }
}

impl Drafter for LookupDrafter {
    fn draft(&mut self, history: &[TokenId], max: usize) -> Result<Vec<TokenId>, ModelError> {
        self.sync(history);
        let h = &self.history;
        for n in (self.ngram_min..=self.ngram_max.min(h.len())).rev() {
            let suffix = &h[h.len() - n..];
            let Some(&end) = self.index.get(&ngram_key(suffix)) else {
                continue;
            };
            let end = end as usize;
            // A hash collision is not a match.
            if end >= n && &h[end - n..end] == suffix {
                return Ok(h[end..(end + max).min(h.len())].to_vec());
            }
        }
        Ok(Vec::new())
    }

    fn is_free(&self) -> bool {
        true
    }
}

/// FNV-1a over the tokens, with the length mixed in so n-grams of different n never share
/// a key by construction.
fn ngram_key(tokens: &[TokenId]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ tokens.len() as u64;
    for &t in tokens {
        for b in t.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(d: &mut LookupDrafter, h: &[TokenId], max: usize) -> Vec<TokenId> {
        d.draft(h, max).unwrap()
    }

    #[test]
    fn proposes_what_followed_the_latest_match() {
        let mut d = LookupDrafter::new(1, 3);
        // "1 2 3" occurs twice before the end; the later one continues with 7 8.
        let h = [1, 2, 3, 4, 5, 1, 2, 3, 7, 8, 9, 1, 2, 3];
        assert_eq!(draft(&mut d, &h, 2), vec![7, 8]);
        assert_eq!(draft(&mut d, &h, 10), vec![7, 8, 9, 1, 2, 3]);
    }

    #[test]
    fn prefers_the_longest_ngram() {
        let mut d = LookupDrafter::new(1, 3);
        // "3" alone last continued with 6, but "2 3" continued with 4.
        let h = [2, 3, 4, 9, 3, 6, 2, 3];
        assert_eq!(draft(&mut d, &h, 1), vec![4]);
    }

    #[test]
    fn grows_with_the_history_and_restarts_on_another_text() {
        let mut d = LookupDrafter::new(2, 2);
        assert!(draft(&mut d, &[1, 2], 4).is_empty());
        assert!(draft(&mut d, &[1, 2, 5], 4).is_empty());
        assert_eq!(draft(&mut d, &[1, 2, 5, 1, 2], 4), vec![5, 1, 2]);
        // Another text: nothing of the first is proposed.
        assert!(draft(&mut d, &[7, 1, 2], 4).is_empty());
        assert!(draft(&mut d, &[], 4).is_empty());
    }
}
