//! Repetition (CTRL) and frequency/presence (OpenAI) penalties over a sliding window of the
//! most recently accepted tokens. Counts are maintained incrementally so applying the
//! penalties costs O(distinct tokens in the window), not O(vocab).

use std::collections::{HashMap, VecDeque};

use super::chain::sanitize;
use super::params::SamplerParams;
use super::TokenId;

#[derive(Clone, Debug)]
pub(crate) struct Penalties {
    last_n: usize,
    repeat: f32,
    frequency: f32,
    presence: f32,
    window: VecDeque<TokenId>,
    counts: HashMap<TokenId, u32>,
}

impl Penalties {
    pub fn new(p: &SamplerParams) -> Self {
        Self {
            last_n: p.penalty_last_n,
            repeat: p.repeat_penalty,
            frequency: p.frequency_penalty,
            presence: p.presence_penalty,
            window: VecDeque::with_capacity(p.penalty_last_n.min(4096)),
            counts: HashMap::new(),
        }
    }

    pub fn active(&self) -> bool {
        self.last_n > 0 && (self.repeat != 1.0 || self.frequency != 0.0 || self.presence != 0.0)
    }

    pub fn accept(&mut self, token: TokenId) {
        if self.last_n == 0 {
            return;
        }
        if self.window.len() == self.last_n {
            if let Some(old) = self.window.pop_front() {
                if let Some(c) = self.counts.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.counts.remove(&old);
                    }
                }
            }
        }
        self.window.push_back(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }

    pub fn reset(&mut self) {
        self.window.clear();
        self.counts.clear();
    }

    /// Applies the penalties in place to a copy of the raw logits (indexed by token id);
    /// ids outside the vocabulary are ignored. Penalised logits are sanitised (NaN → -inf,
    /// +inf → f32::MAX) before and after, as every candidate logit is.
    pub fn apply(&self, logits: &mut [f32]) {
        if !self.active() {
            return;
        }
        for (&tok, &count) in &self.counts {
            let Some(logit) = logits.get_mut(tok as usize) else {
                continue;
            };
            let mut l = sanitize(*logit);
            // Same rule as llama.cpp: a zero logit is "non-positive" and gets multiplied.
            if l <= 0.0 {
                l *= self.repeat;
            } else {
                l /= self.repeat;
            }
            l -= count as f32 * self.frequency + self.presence;
            // A penalty < 1 can overflow a huge logit; keep the "finite or -inf" invariant.
            *logit = sanitize(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(repeat: f32, freq: f32, pres: f32, last_n: usize) -> SamplerParams {
        SamplerParams {
            repeat_penalty: repeat,
            frequency_penalty: freq,
            presence_penalty: pres,
            penalty_last_n: last_n,
            ..SamplerParams::default()
        }
    }

    fn apply(p: &Penalties, logits: &[f32]) -> Vec<f32> {
        let mut out = logits.to_vec();
        p.apply(&mut out);
        out
    }

    #[test]
    fn repetition_divides_positive_multiplies_negative() {
        let mut p = Penalties::new(&params(2.0, 0.0, 0.0, 64));
        for t in [0, 1, 2] {
            p.accept(t);
        }
        let out = apply(&p, &[4.0, -4.0, 0.0, 3.0]);
        assert_eq!(out, [2.0, -8.0, 0.0, 3.0]);
    }

    #[test]
    fn frequency_and_presence() {
        let mut p = Penalties::new(&params(1.0, 0.5, 1.0, 64));
        for t in [1, 1, 1, 2] {
            p.accept(t);
        }
        // token 1: 3 * 0.5 + 1; token 2: 1 * 0.5 + 1; token 0 unseen.
        let out = apply(&p, &[1.0, 1.0, 1.0]);
        assert_eq!(out, [1.0, 1.0 - 2.5, 1.0 - 1.5]);
    }

    #[test]
    fn combined_order_is_repeat_then_additive() {
        let mut p = Penalties::new(&params(2.0, 1.0, 0.5, 64));
        p.accept(0);
        p.accept(0);
        let out = apply(&p, &[6.0]);
        assert_eq!(out, [6.0 / 2.0 - (2.0 * 1.0 + 0.5)]);
    }

    #[test]
    fn window_slides_and_off_switches() {
        let mut p = Penalties::new(&params(1.0, 1.0, 0.0, 2));
        for t in [0, 1, 1] {
            p.accept(t); // token 0 falls out of the window of 2
        }
        assert_eq!(apply(&p, &[0.0, 0.0]), [0.0, -2.0]);
        p.reset();
        assert_eq!(apply(&p, &[0.0, 0.0]), [0.0, 0.0]);

        let mut off = Penalties::new(&params(2.0, 1.0, 1.0, 0));
        off.accept(0);
        assert_eq!(apply(&off, &[5.0]), [5.0]);
    }

    #[test]
    fn out_of_vocab_ids_and_infinities() {
        let mut p = Penalties::new(&params(0.5, 0.0, 0.0, 8));
        p.accept(7); // beyond the 2-token vocabulary: ignored
        p.accept(0);
        p.accept(1);
        let out = apply(&p, &[f32::MAX, f32::NEG_INFINITY]);
        assert_eq!(out, [f32::MAX, f32::NEG_INFINITY]);
        // Raw +inf and NaN are sanitised before the penalty, as candidates are.
        let out = apply(&p, &[f32::INFINITY, f32::NAN]);
        assert_eq!(out, [f32::MAX, f32::NEG_INFINITY]);
    }
}
