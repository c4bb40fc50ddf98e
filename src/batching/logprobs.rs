//! Log-probabilities of generated tokens (OpenAI's `logprobs`): the chosen token's and the
//! most likely alternatives', under the model's own distribution (the raw logits, before
//! temperature, penalties or a constraint).

use std::collections::VecDeque;

use crate::tokenizer::TokenId;

/// A generated token's log-probability and the `top` most likely tokens at its position
/// (most likely first).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token: TokenId,
    pub logprob: f32,
    pub top: Vec<(TokenId, f32)>,
}

/// Most alternatives a request may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

impl TokenLogprob {
    /// `log_softmax(logits)` at `token`, and the `top_n` best alternatives.
    pub fn from_logits(logits: &[f32], token: TokenId, top_n: usize) -> TokenLogprob {
        let max = logits
            .iter()
            .copied()
            .filter(|l| !l.is_nan())
            .fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = logits
            .iter()
            .filter(|l| !l.is_nan())
            .map(|&l| f64::from(l - max).exp())
            .sum();
        let log_norm = max + sum.ln() as f32;
        let logprob = |l: f32| {
            if l.is_nan() {
                f32::NEG_INFINITY
            } else {
                l - log_norm
            }
        };
        let top_n = top_n.min(MAX_TOP_LOGPROBS).min(logits.len());
        let mut best: Vec<(TokenId, f32)> = Vec::with_capacity(top_n + 1);
        if top_n > 0 {
            for (id, &l) in logits.iter().enumerate() {
                let l = logprob(l);
                if best.len() == top_n && l <= best[top_n - 1].1 {
                    continue;
                }
                let at = best.partition_point(|&(_, b)| b >= l);
                best.insert(at, (id as TokenId, l));
                best.truncate(top_n);
            }
        }
        TokenLogprob {
            token,
            logprob: logits
                .get(token as usize)
                .map_or(f32::NEG_INFINITY, |&l| logprob(l)),
            top: best,
        }
    }
}

/// Holds each token's entry until the text it produced is released (the UTF-8 decoder and
/// stop strings hold text back), so entries travel with their text; the tokens of a stop
/// string are never released.
#[derive(Default)]
pub(super) struct LogprobQueue {
    /// Entries with the decoded length the text reaches once their token is in.
    entries: VecDeque<(TokenLogprob, usize)>,
    decoded: usize,
    released: usize,
}

impl LogprobQueue {
    /// `decoded_bytes`: the text the decoder gave out for this token. A token that gave none
    /// yet (half a character) waits for the next text, which carries its bytes.
    pub(super) fn push(&mut self, entry: TokenLogprob, decoded_bytes: usize) {
        self.decoded += decoded_bytes;
        let end = self.decoded + usize::from(decoded_bytes == 0);
        self.entries.push_back((entry, end));
    }

    /// `text_bytes` more bytes of text were released: the entries whose text is now out.
    pub(super) fn release(&mut self, text_bytes: usize) -> Vec<TokenLogprob> {
        self.released += text_bytes;
        let mut out = Vec::new();
        while self
            .entries
            .front()
            .is_some_and(|(_, end)| *end <= self.released)
        {
            out.push(self.entries.pop_front().expect("checked").0);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_a_log_softmax_with_the_best_first() {
        let logits = [1.0f32, 3.0, 2.0, f32::NAN, 3.0];
        let e = TokenLogprob::from_logits(&logits, 2, 3);
        let norm: f32 = [1.0f32, 3.0, 2.0, 3.0]
            .iter()
            .map(|l| l.exp())
            .sum::<f32>()
            .ln();
        assert!((e.logprob - (2.0 - norm)).abs() < 1e-5);
        let ids: Vec<TokenId> = e.top.iter().map(|t| t.0).collect();
        assert_eq!(ids, [1, 4, 2], "ties keep the lower id first");
        assert!(TokenLogprob::from_logits(&logits, 9, 0).logprob == f32::NEG_INFINITY);
    }

    #[test]
    fn entries_wait_for_their_text() {
        let e = |t| TokenLogprob {
            token: t,
            logprob: 0.0,
            top: vec![],
        };
        let mut q = LogprobQueue::default();
        q.push(e(1), 3); // "abc"
        q.push(e(2), 0); // half a character
        q.push(e(3), 2); // its end and one more
        assert!(q.release(2).is_empty());
        assert_eq!(
            q.release(1).iter().map(|e| e.token).collect::<Vec<_>>(),
            [1]
        );
        assert_eq!(
            q.release(2).iter().map(|e| e.token).collect::<Vec<_>>(),
            [2, 3]
        );
    }
}
