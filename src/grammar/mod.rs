//! Constrained sampling: a token mask per step that keeps the output inside a JSON schema, a
//! grammar (GBNF or Lark) or a regular expression.
//!
//! The masks come from `llguidance` (an Earley parser over a derivative-based lexer, fast on
//! 150k+ vocabularies). Kolibri adds what sits around it: the vocabulary as token bytes
//! ([`GrammarCompiler`], built once per model), llama.cpp's GBNF translated to llguidance's
//! Lark dialect ([`gbnf_to_lark`]), and the per-generation [`Constraint`] that a
//! [`crate::sampling::Sampler`] applies before it samples and advances after.
//!
//! End of generation: llguidance knows one end token; every end-of-generation token of the
//! model stands for it, so a grammar may finish with `<|im_end|>` or `<|endoftext|>` alike.

mod compiler;
mod constraint;
mod gbnf;

pub use compiler::GrammarCompiler;
pub use constraint::Constraint;
pub use gbnf::gbnf_to_lark;

use std::fmt;

/// What the output must match.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstraintSpec {
    /// Any JSON object (OpenAI's `response_format: {"type": "json_object"}`).
    JsonObject,
    /// A JSON Schema, as JSON text.
    JsonSchema(String),
    /// A grammar in llama.cpp's GBNF (`root ::= ...`).
    Gbnf(String),
    /// A grammar in llguidance's Lark dialect (`start: ...`).
    Lark(String),
    /// A regular expression the whole output matches.
    Regex(String),
}

/// Why a constraint could not be built or followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrammarError {
    /// The grammar, schema or expression is not valid; the text says where and why.
    Invalid(String),
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrammarError::Invalid(why) => write!(f, "invalid constraint: {why}"),
        }
    }
}

impl std::error::Error for GrammarError {}

#[cfg(test)]
mod tests;
