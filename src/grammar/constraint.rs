//! One generation's constraint: the mask before each sampled token, the advance after it.

use std::fmt;
use std::sync::Arc;

use llguidance::toktrie::SimpleVob;
use llguidance::{Matcher, TokenParser};

use crate::sampling::TokenId;

/// The state of one constrained output. Made by [`super::GrammarCompiler::compile`]; a
/// [`crate::sampling::Sampler`] holding it masks every distribution it samples from and
/// commits every token it returns. Cloning copies the parse state (for `n > 1` choices).
pub struct Constraint {
    matcher: Matcher,
    end_tokens: Arc<[TokenId]>,
    /// llguidance's one end token, which stands for all of `end_tokens`.
    eos: TokenId,
    /// The mask at the current position, computed once however often it is asked for.
    mask: Option<SimpleVob>,
}

impl Constraint {
    pub(super) fn new(parser: TokenParser, end_tokens: Arc<[TokenId]>) -> Constraint {
        let eos = parser.token_env.tok_trie().eos_token();
        Constraint {
            matcher: Matcher::new(Ok(parser)),
            end_tokens,
            eos,
            mask: None,
        }
    }

    /// Sets the logit of every token the constraint forbids at this position to `-inf`. Once
    /// the grammar is complete (or has failed) only end-of-generation tokens remain.
    pub fn mask_logits(&mut self, logits: &mut [f32]) {
        let end_allowed = self.end_allowed();
        let saved: Vec<(TokenId, f32)> = if end_allowed {
            self.end_tokens
                .iter()
                .filter_map(|&t| logits.get(t as usize).map(|&l| (t, l)))
                .collect()
        } else {
            Vec::new()
        };
        let words = self.mask().as_slice();
        for (chunk_idx, chunk) in logits.chunks_mut(32).enumerate() {
            let word = words.get(chunk_idx).copied().unwrap_or(0);
            if word == u32::MAX {
                continue;
            }
            for (bit, logit) in chunk.iter_mut().enumerate() {
                if word & (1 << bit) == 0 {
                    *logit = f32::NEG_INFINITY;
                }
            }
        }
        for (t, l) in saved {
            logits[t as usize] = l;
        }
    }

    /// Whether `token` may come next.
    pub fn allows(&mut self, token: TokenId) -> bool {
        allowed(self.mask(), token) || (self.is_end(token) && self.end_allowed())
    }

    /// Advances past `token`, the one that was sampled. A token the mask forbade puts the
    /// constraint in its failed state ([`Constraint::failure`]), which allows only an end.
    pub fn commit(&mut self, token: TokenId) {
        if self.matcher.is_error() {
            return;
        }
        // A complete output has already stopped the parser; its end needs no consuming.
        if self.is_end(token) && self.matcher.is_stopped() {
            return;
        }
        // An end token the grammar does not name itself is its end.
        let as_seen = if self.is_end(token) && !allowed(self.mask(), token) {
            self.eos
        } else {
            token
        };
        let _ = self.matcher.consume_token(as_seen);
        self.mask = None;
    }

    /// The output so far is complete and nothing can follow it.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    /// Why the constraint stopped following the output, if it did: a forbidden token was
    /// committed, or the grammar hit one of llguidance's limits.
    pub fn failure(&self) -> Option<String> {
        self.matcher.get_error()
    }

    fn is_end(&self, token: TokenId) -> bool {
        self.end_tokens.contains(&token)
    }

    fn end_allowed(&mut self) -> bool {
        let eos = self.eos;
        allowed(self.mask(), eos)
    }

    fn mask(&mut self) -> &SimpleVob {
        if self.mask.is_none() {
            let mask = match self.matcher.compute_mask_or_eos() {
                Ok(mask) => mask,
                // Failed: nothing but an end can follow.
                Err(_) => {
                    let mut end_only = SimpleVob::alloc(self.eos as usize + 1);
                    end_only.allow_token(self.eos);
                    end_only
                }
            };
            self.mask = Some(mask);
        }
        self.mask.as_ref().expect("computed above")
    }
}

/// Bounds-checked: a mask may be shorter than the logits (the model's output rows can
/// outnumber the tokenizer's tokens); what it does not cover is forbidden.
fn allowed(mask: &SimpleVob, token: TokenId) -> bool {
    let word = mask
        .as_slice()
        .get(token as usize / 32)
        .copied()
        .unwrap_or(0);
    word & (1 << (token % 32)) != 0
}

impl Clone for Constraint {
    fn clone(&self) -> Self {
        Constraint {
            matcher: self.matcher.deep_clone(),
            end_tokens: self.end_tokens.clone(),
            eos: self.eos,
            mask: self.mask.clone(),
        }
    }
}

impl fmt::Debug for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Constraint")
            .field("finished", &self.is_finished())
            .field("failure", &self.failure())
            .finish_non_exhaustive()
    }
}
