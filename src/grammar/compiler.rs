//! The model's vocabulary as llguidance sees it, and grammars compiled against it.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{JsonCompileOptions, ParserFactory};

use super::{gbnf_to_lark, Constraint, ConstraintSpec, GrammarError};
use crate::sampling::TokenId;
use crate::tokenizer::Tokenizer;

/// Builds [`Constraint`]s for one model. Building it walks the whole vocabulary (tens of
/// milliseconds for 150k tokens), so make one per model and share it: it is `Send + Sync`
/// and cheap to clone.
#[derive(Clone)]
pub struct GrammarCompiler {
    factory: Arc<ParserFactory>,
    /// Every end-of-generation token; llguidance's single end token stands for all of them.
    end_tokens: Arc<[TokenId]>,
}

impl GrammarCompiler {
    pub fn new(tokenizer: &Tokenizer) -> Result<GrammarCompiler, GrammarError> {
        let n_vocab = tokenizer.n_vocab();
        let words: Vec<Vec<u8>> = (0..n_vocab as TokenId)
            .map(|id| token_word(tokenizer, id))
            .collect();
        let end_tokens: Arc<[TokenId]> = (0..n_vocab as TokenId)
            .filter(|&id| tokenizer.is_eog(id))
            .collect();
        // A vocabulary without an end token still needs one for llguidance; no mask ever
        // allows it then, because `Constraint` only lets listed end tokens through.
        let eos = tokenizer
            .eos()
            .filter(|&id| tokenizer.is_eog(id))
            .or_else(|| end_tokens.first().copied())
            .unwrap_or(0);
        let info = TokRxInfo::new(n_vocab as u32, eos);
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).map_err(invalid)?;
        // Errors come back as values; llguidance must not write to the host's stderr.
        factory.quiet();
        Ok(GrammarCompiler {
            factory: Arc::new(factory),
            end_tokens,
        })
    }

    /// Compiles `spec` into a fresh constraint positioned at the start of the output.
    pub fn compile(&self, spec: &ConstraintSpec) -> Result<Constraint, GrammarError> {
        let grammar = match spec {
            ConstraintSpec::JsonObject => TopLevelGrammar::from_json_schema(with_json_style(
                serde_json::json!({"type": "object"}),
            )?),
            ConstraintSpec::JsonSchema(text) => {
                let schema: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| GrammarError::Invalid(format!("schema is not JSON: {e}")))?;
                TopLevelGrammar::from_json_schema(with_json_style(schema)?)
            }
            ConstraintSpec::Gbnf(text) => TopLevelGrammar::from_lark(gbnf_to_lark(text)?),
            ConstraintSpec::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
            ConstraintSpec::Regex(rx) => TopLevelGrammar::from_regex(rx),
        };
        let parser = self.factory.create_parser(grammar).map_err(invalid)?;
        Ok(Constraint::new(parser, self.end_tokens.clone()))
    }

    /// The number of tokens the masks cover.
    pub fn n_vocab(&self) -> usize {
        self.factory.tok_env().tok_trie().vocab_size()
    }
}

/// A token's bytes for the trie: its text for ordinary tokens, and llguidance's special-token
/// form (0xFF, then the text) for control tokens, which grammars can name but text never
/// spells.
fn token_word(tokenizer: &Tokenizer, id: TokenId) -> Vec<u8> {
    if tokenizer.is_control(id) || tokenizer.is_eog(id) {
        let mut word = vec![TokTrie::SPECIAL_TOKEN_MARKER];
        word.extend_from_slice(tokenizer.token_text(id).unwrap_or("").as_bytes());
        word
    } else {
        tokenizer.token_bytes(id, false)
    }
}

/// Fixes how the JSON is laid out, as `json.dumps` writes it (`, ` and `: `, no other
/// whitespace), unless the schema sets llguidance's own `x-guidance` options. Free whitespace
/// would let a model pad its output without end.
fn with_json_style(schema: serde_json::Value) -> Result<serde_json::Value, GrammarError> {
    let mut schema = match schema {
        serde_json::Value::Object(_) => schema,
        serde_json::Value::Bool(true) => serde_json::json!({}),
        serde_json::Value::Bool(false) => {
            return Err(GrammarError::Invalid(
                "the schema `false` allows nothing".into(),
            ))
        }
        _ => {
            return Err(GrammarError::Invalid(
                "a JSON schema is an object or a boolean".into(),
            ))
        }
    };
    if schema.get("x-guidance").is_none() {
        let style = JsonCompileOptions {
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            whitespace_flexible: false,
            ..JsonCompileOptions::default()
        };
        style.apply_to(&mut schema);
    }
    Ok(schema)
}

fn invalid(e: impl std::fmt::Display) -> GrammarError {
    GrammarError::Invalid(e.to_string())
}
