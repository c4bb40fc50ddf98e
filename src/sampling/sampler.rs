//! The stateful sampler: penalties → top-k → top-p → min-p → temperature → seeded draw,
//! the order of llama.cpp's default chain.

use super::chain::{self, Candidate};
use super::params::{SamplerParams, SamplingError};
use super::penalties::Penalties;
use super::rng::Xoshiro256StarStar;
use super::TokenId;
#[cfg(feature = "grammar")]
use crate::grammar::Constraint;

#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplerParams,
    penalties: Penalties,
    rng: Xoshiro256StarStar,
    /// Reused between calls so a 262k vocabulary costs no allocation per token.
    cands: Vec<Candidate>,
    /// The logits with penalties and the constraint's mask applied, when either is active
    /// (reused likewise).
    penalised: Vec<f32>,
    /// Structured output: masks every distribution and follows every sampled token.
    #[cfg(feature = "grammar")]
    constraint: Option<Constraint>,
    /// Tokens never chosen (the model's suppressed tokens).
    suppressed: Vec<TokenId>,
}

impl Sampler {
    pub fn new(params: SamplerParams) -> Result<Sampler, SamplingError> {
        params.validate()?;
        Ok(Sampler {
            penalties: Penalties::new(&params),
            rng: Xoshiro256StarStar::seed_from_u64(params.seed),
            cands: Vec::new(),
            penalised: Vec::new(),
            #[cfg(feature = "grammar")]
            constraint: None,
            suppressed: Vec::new(),
            params,
        })
    }

    /// This sampler never chooses `tokens` (a model's
    /// [`crate::tokenizer::Tokenizer::suppressed`], as llama.cpp's common sampler biases them
    /// to -inf); ids past the logits are ignored.
    pub fn suppress(&mut self, tokens: &[TokenId]) {
        self.suppressed = tokens.to_vec();
    }

    /// Constrains what this sampler returns from now on (`None` lifts it). Every `sample`
    /// then draws from the distribution restricted to what the constraint allows and
    /// commits the token to it; `candidates` shows the restricted distribution.
    #[cfg(feature = "grammar")]
    pub fn set_constraint(&mut self, constraint: Option<Constraint>) {
        self.constraint = constraint;
    }

    #[cfg(feature = "grammar")]
    pub fn constraint(&self) -> Option<&Constraint> {
        self.constraint.as_ref()
    }

    pub fn params(&self) -> &SamplerParams {
        &self.params
    }

    /// Picks a token from raw logits (len = n_vocab); does not modify the caller's slice.
    /// NaN logits count as `-inf`. If every logit is `-inf`/NaN, returns the lowest id (0);
    /// an empty slice also returns 0. Greedy mode does not consume randomness.
    pub fn sample(&mut self, logits: &[f32]) -> TokenId {
        let token = self.choose(logits);
        self.commit(token);
        token
    }

    fn choose(&mut self, logits: &[f32]) -> TokenId {
        if self.params.is_greedy() {
            self.prepare(logits);
            return chain::argmax_candidates(&self.cands).map_or(0, |c| c.id);
        }
        if !self.prepare(logits) {
            return 0;
        }
        let u = self.rng.next_f64();
        chain::draw(&self.cands, u)
    }

    /// Takes a token chosen by the caller (a forced one) as if it had been sampled.
    pub fn take_forced(&mut self, token: TokenId) {
        self.commit(token);
    }

    /// Tells the constraint, if any, which token was chosen.
    fn commit(&mut self, _token: TokenId) {
        #[cfg(feature = "grammar")]
        if let Some(c) = &mut self.constraint {
            c.commit(_token);
        }
    }

    /// Samples the token that follows a drafted guess `draft` (speculative decoding's
    /// verification) so that the result has exactly the distribution [`Sampler::sample`] has:
    /// the draft, proposed with certainty, is kept with probability p(draft); otherwise a token
    /// is drawn from p with the draft removed. Greedy mode is the argmax, as in `sample`.
    pub fn sample_given_draft(&mut self, logits: &[f32], draft: TokenId) -> TokenId {
        let token = self.choose_given_draft(logits, draft);
        self.commit(token);
        token
    }

    fn choose_given_draft(&mut self, logits: &[f32], draft: TokenId) -> TokenId {
        if self.params.is_greedy() {
            return self.choose(logits);
        }
        if !self.prepare(logits) {
            return 0;
        }
        let p_draft = self
            .cands
            .iter()
            .find(|c| c.id == draft)
            .map_or(0.0, |c| c.p);
        if self.rng.next_f64() < p_draft as f64 {
            return draft;
        }
        for c in self.cands.iter_mut().filter(|c| c.id == draft) {
            c.p = 0.0;
        }
        let u = self.rng.next_f64();
        chain::draw(&self.cands, u)
    }

    /// Runs the chain up to (not including) the draw and returns the surviving candidates with
    /// `logit` = penalised logit and `p` = final sampling probability. Order is unspecified.
    /// Useful for logprob reporting and tests; does not advance the RNG. In greedy mode this is
    /// the single argmax with `p = 1`; with no finite logit it is empty.
    pub fn candidates(&mut self, logits: &[f32]) -> &[Candidate] {
        if self.params.is_greedy() {
            self.prepare(logits);
            match chain::argmax_candidates(&self.cands) {
                Some(best) if best.logit > f32::NEG_INFINITY => {
                    self.cands.clear();
                    self.cands.push(Candidate { p: 1.0, ..best });
                }
                _ => self.cands.clear(),
            }
        } else if !self.prepare(logits) {
            self.cands.clear();
        }
        &self.cands
    }

    /// Records a token as generated/seen, for the penalties. Call it for each chosen token
    /// (and, if prompt tokens should be penalised too, for those).
    pub fn accept(&mut self, token: TokenId) {
        self.penalties.accept(token);
    }

    /// Forgets the penalty history and reseeds the RNG, so the sampler replays the same
    /// sequence as a freshly created one (as llama.cpp's dist sampler does on reset).
    pub fn reset(&mut self) {
        self.penalties.reset();
        self.rng = Xoshiro256StarStar::seed_from_u64(self.params.seed);
    }

    /// Applies penalties and keeps the best candidates: the argmax in greedy mode, else
    /// top-k, top-p, min-p and temperature. Returns false when no candidate has a finite
    /// logit. Never writes out the whole vocabulary as candidates when top-k bounds it.
    fn prepare(&mut self, logits: &[f32]) -> bool {
        let logits = if self.penalties.active() || self.constrained() || !self.suppressed.is_empty()
        {
            self.penalised.clear();
            self.penalised.extend_from_slice(logits);
            self.penalties.apply(&mut self.penalised);
            for &id in &self.suppressed {
                if let Some(l) = self.penalised.get_mut(id as usize) {
                    *l = f32::NEG_INFINITY;
                }
            }
            #[cfg(feature = "grammar")]
            if let Some(c) = &mut self.constraint {
                c.mask_logits(&mut self.penalised);
            }
            &self.penalised[..]
        } else {
            logits
        };
        let p = &self.params;
        // Greedy is top-1 under the same order (highest logit, lowest id on ties).
        let k = if p.is_greedy() { 1 } else { p.top_k };
        chain::top_k_of_logits(&mut self.cands, logits, k);
        if self.cands.is_empty() {
            return false;
        }
        if p.is_greedy() {
            return true;
        }
        chain::top_p_min_p(&mut self.cands, p.top_p, p.min_p);
        chain::softmax_with_temperature(&mut self.cands, p.temperature);
        true
    }

    fn constrained(&self) -> bool {
        #[cfg(feature = "grammar")]
        return self.constraint.is_some();
        #[cfg(not(feature = "grammar"))]
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Suppressed tokens are never chosen, greedy or sampled, even as the most likely token,
    /// nor offered as candidates or kept as a draft.
    #[test]
    fn suppressed_tokens_are_never_chosen() {
        // Token 2 is far ahead of the others.
        let logits = [1.0, 1.0, 9.0, -1.0];
        for params in [SamplerParams::greedy(), SamplerParams::default()] {
            let mut s = Sampler::new(params.clone()).unwrap();
            assert_eq!(s.sample(&logits), 2, "without suppression");
            s.suppress(&[2, 7]);
            for _ in 0..200 {
                let t = s.sample(&logits);
                assert_ne!(t, 2, "{params:?} chose a suppressed token");
                assert_ne!(
                    s.sample_given_draft(&logits, 2),
                    2,
                    "a suppressed draft kept"
                );
            }
            assert!(s.candidates(&logits).iter().all(|c| c.id != 2));
            s.suppress(&[]);
            assert_eq!(s.candidates(&logits).iter().map(|c| c.id).next(), Some(2));
        }
    }
}
