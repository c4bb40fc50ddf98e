//! Prompt lookup: the tokens that followed the latest earlier occurrence of the text's last
//! n tokens (n from `ngram_max` down to `ngram_min`) are proposed as the continuation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    /// Earlier texts, asked when this one has no match.
    pool: Option<Arc<NgramPool>>,
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
            pool: None,
        }
    }

    /// Also drafts from `pool` when this text has no match, and [`LookupDrafter::share`]
    /// teaches it this text.
    pub fn with_pool(mut self, pool: Arc<NgramPool>) -> LookupDrafter {
        self.pool = Some(pool);
        self
    }

    /// Adds the text seen so far to the pool, for later texts to draft from.
    pub fn share(&self) {
        if let Some(pool) = &self.pool {
            pool.learn(&self.history);
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
        // The pool's n-grams rank below this text's as long, above its shorter ones.
        let pool_n = self.pool.as_ref().map_or(0, |p| p.n);
        let mut pool_asked = false;
        let mut ask_pool = || match &self.pool {
            Some(pool) if !pool_asked => {
                pool_asked = true;
                pool.continuation(h, max)
            }
            _ => Vec::new(),
        };
        for n in (self.ngram_min..=self.ngram_max.min(h.len())).rev() {
            if n < pool_n {
                let found = ask_pool();
                if !found.is_empty() {
                    return Ok(found);
                }
            }
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
        Ok(ask_pool())
    }

    fn is_free(&self) -> bool {
        true
    }
}

/// N-grams of earlier texts (a server's finished requests) and what followed each most
/// recently, shared by every slot's drafter. Bounded: past `max_entries` it starts afresh.
pub struct NgramPool {
    n: usize,
    max_entries: usize,
    /// n-gram hash → the n-gram, then up to [`POOL_CONTINUATION`] tokens that followed it.
    map: Mutex<HashMap<u64, Vec<TokenId>>>,
}

/// Tokens kept after each n-gram of the pool.
const POOL_CONTINUATION: usize = 16;

impl NgramPool {
    /// Keys of `n` tokens (clamped to 1..=16), at most `max_entries` of them.
    pub fn new(n: usize, max_entries: usize) -> NgramPool {
        NgramPool {
            n: n.clamp(1, 16),
            max_entries,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Records every n-gram of `tokens` with what followed it.
    pub fn learn(&self, tokens: &[TokenId]) {
        let n = self.n;
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() + tokens.len() > self.max_entries {
            map.clear();
        }
        for end in n..tokens.len() {
            let stop = (end + POOL_CONTINUATION).min(tokens.len());
            map.insert(
                ngram_key(&tokens[end - n..end]),
                tokens[end - n..stop].to_vec(),
            );
        }
    }

    /// Up to `max` tokens that followed the last n tokens of `history` in an earlier text.
    pub fn continuation(&self, history: &[TokenId], max: usize) -> Vec<TokenId> {
        let n = self.n;
        if history.len() < n {
            return Vec::new();
        }
        let suffix = &history[history.len() - n..];
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&ngram_key(suffix)) {
            Some(seen) if &seen[..n] == suffix => seen[n..].iter().take(max).copied().collect(),
            _ => Vec::new(),
        }
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

    #[test]
    fn a_pool_drafts_from_earlier_texts() {
        let pool = Arc::new(NgramPool::new(2, 1000));
        let mut first = LookupDrafter::new(1, 3).with_pool(Arc::clone(&pool));
        draft(&mut first, &[10, 11, 12, 13, 14], 4);
        first.share();
        let mut second = LookupDrafter::new(1, 3).with_pool(pool);
        // Nothing in its own text; the pool saw 11 12 followed by 13 14.
        assert_eq!(draft(&mut second, &[5, 11, 12], 4), vec![13, 14]);
        assert_eq!(draft(&mut second, &[5, 11, 12], 1), vec![13]);
        assert!(draft(&mut second, &[5, 12, 11], 4).is_empty());
    }
}
