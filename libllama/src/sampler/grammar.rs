//! `llama_sampler_init_grammar`: GBNF through Kolibri's constrained sampling (llguidance).

use super::candidates::Candidates;
use super::Stage;
use crate::types::llama_token;
use kolibri::grammar::{Constraint, ConstraintSpec, GrammarCompiler};
use std::ffi::CStr;

#[derive(Clone)]
pub struct Grammar {
    compiler: GrammarCompiler,
    spec: ConstraintSpec,
    constraint: Constraint,
    /// The mask of each step, one logit per vocabulary entry, refilled every token.
    allowed: Vec<f32>,
}

impl Grammar {
    /// `gbnf` with `root` as its start rule.
    pub fn new(compiler: &GrammarCompiler, gbnf: &str, root: &str) -> Result<Grammar, String> {
        let mut text = gbnf.to_string();
        let has_root = gbnf
            .lines()
            .any(|l| l.trim_start().starts_with("root ") || l.trim_start().starts_with("root::="));
        if root != "root" && !has_root {
            text.push_str(&format!("\nroot ::= {root}\n"));
        }
        let spec = ConstraintSpec::Gbnf(text);
        let constraint = compiler.compile(&spec).map_err(|e| e.to_string())?;
        Ok(Grammar {
            compiler: compiler.clone(),
            spec,
            constraint,
            allowed: vec![0.0; compiler.n_vocab()],
        })
    }
}

impl Stage for Grammar {
    fn name(&self) -> &'static CStr {
        c"grammar"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        self.allowed.fill(0.0);
        self.constraint.mask_logits(&mut self.allowed);
        let allowed = &self.allowed;
        for c in cur.data() {
            let ok = usize::try_from(c.id)
                .ok()
                .and_then(|i| allowed.get(i))
                .is_some_and(|&l| l != f32::NEG_INFINITY);
            if !ok {
                c.logit = f32::NEG_INFINITY;
            }
        }
    }
    fn accept(&mut self, token: llama_token) {
        if let Ok(id) = u32::try_from(token) {
            self.constraint.commit(id);
        }
    }
    fn reset(&mut self) {
        if let Ok(fresh) = self.compiler.compile(&self.spec) {
            self.constraint = fresh;
        }
    }
}
