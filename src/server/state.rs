//! What every handler shares: the scheduler, the chat template, the key and the limits.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::batching::Scheduler;
use crate::chat::{ChatTemplate, ChatTemplateError};
use crate::grammar::{Constraint, ConstraintSpec, GrammarCompiler, GrammarError};
use crate::tokenizer::TokenId;
use axum::http::{header, HeaderMap};

use super::error::ApiError;
use super::reply::ThinkingOptions;

pub struct AppState {
    pub scheduler: Scheduler,
    pub template: Result<ChatTemplate, ChatTemplateError>,
    /// The name `/v1/models` lists (the file name without `.gguf`, or `--alias`).
    pub model_id: String,
    pub api_key: Option<String>,
    /// Unix time the server started (the model's `created`).
    pub started: u64,
    /// Longest a request may take from arrival to its last token.
    pub request_timeout: Duration,
    /// Where `POST /slots/{id}` saves and restores slots (`--slot-save-path`); `None`: off.
    pub slot_save_path: Option<PathBuf>,
    pub http_requests: AtomicU64,
    pub http_client_errors: AtomicU64,
    pub http_server_errors: AtomicU64,
    /// Connections closed on arrival because the connection cap was reached.
    pub connections_refused: AtomicU64,
    ids: AtomicU64,
    /// Built on the first structured-output request (it walks the whole vocabulary once).
    grammar: OnceLock<Result<GrammarCompiler, GrammarError>>,
    /// The context embeddings are computed in.
    pub embedder: super::embeddings::Embedder,
    /// The server's thinking settings, which requests may override.
    pub thinking: ThinkingOptions,
}

impl AppState {
    pub fn new(
        scheduler: Scheduler,
        template: Result<ChatTemplate, ChatTemplateError>,
        model_id: String,
        api_key: Option<String>,
        request_timeout: Duration,
        slot_save_path: Option<PathBuf>,
    ) -> AppState {
        AppState {
            scheduler,
            template,
            model_id,
            api_key,
            started: unix_now(),
            request_timeout,
            slot_save_path,
            http_requests: AtomicU64::new(0),
            http_client_errors: AtomicU64::new(0),
            http_server_errors: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            ids: AtomicU64::new(0),
            grammar: OnceLock::new(),
            embedder: Default::default(),
            thinking: ThinkingOptions::default(),
        }
    }

    /// With these thinking settings (`--reasoning-format`, `--reasoning-budget`,
    /// `--chat-template-kwargs`).
    pub fn with_thinking(mut self, thinking: ThinkingOptions) -> AppState {
        self.thinking = thinking;
        self
    }

    /// Compiles a request's constraint against the model's vocabulary. Slow for a large
    /// schema, so callers run it off the async threads.
    pub fn compile_constraint(&self, spec: &ConstraintSpec) -> Result<Constraint, GrammarError> {
        let compiler = self
            .grammar
            .get_or_init(|| GrammarCompiler::new(&self.scheduler.model().tokenizer));
        compiler.as_ref().map_err(Clone::clone)?.compile(spec)
    }

    /// Checks the bearer key (when the server has one) in time independent of the key's content.
    pub fn authorize(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(key) = &self.api_key else {
            return Ok(());
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if constant_time_eq(given.trim().as_bytes(), key.as_bytes()) {
            Ok(())
        } else {
            Err(ApiError::unauthorized())
        }
    }

    /// A fresh response id such as `chatcmpl-1f2e3d4c5b6a7988`.
    pub fn next_id(&self, prefix: &str) -> String {
        format!("{prefix}-{:016x}", self.random_seed())
    }

    /// A seed for requests that do not give one: different for every request.
    pub fn random_seed(&self) -> u64 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let n = self.ids.fetch_add(1, Relaxed);
        nanos ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// Tokenizes a prompt the way llama.cpp's server does: special tokens parsed, the model's
    /// BOS added unless the text (a rendered chat template, say) already starts with it.
    /// User text for embedding: the model's BOS, no special-token parsing.
    pub fn tokenize_plain(&self, text: &str) -> Vec<TokenId> {
        self.scheduler.model().tokenizer.encode(text, true, false)
    }

    pub fn tokenize(&self, text: &str) -> Vec<TokenId> {
        let tok = &self.scheduler.model().tokenizer;
        let mut ids = tok.encode(text, true, true);
        if let Some(bos) = tok.bos() {
            if ids.len() >= 2 && ids[0] == bos && ids[1] == bos {
                ids.remove(0);
            }
        }
        ids
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Compares every byte whatever the first difference, so response time does not reveal how
/// much of a guessed key was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= u64::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn key_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"secret"));
        assert!(!constant_time_eq(b"secret\xff", b"secret"));
    }
}
