//! What every handler shares: the models, the key and the limits.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{header, HeaderMap};

use super::engine::Engine;
use super::error::ApiError;
use super::pool::ModelPool;
use super::reply::ThinkingOptions;
use super::request_log::LogOptions;
use super::responses::Conversations;

pub struct AppState {
    /// The model, or the models loaded on demand.
    pub pool: ModelPool,
    pub api_key: Option<String>,
    /// Unix time the server started.
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
    /// The server's thinking settings, which requests may override.
    pub thinking: ThinkingOptions,
    /// How requests are logged.
    pub log: LogOptions,
    /// Recent responses' conversations, for the Responses API's `previous_response_id`.
    pub responses: Conversations,
}

impl AppState {
    pub fn new(
        pool: ModelPool,
        api_key: Option<String>,
        request_timeout: Duration,
        slot_save_path: Option<PathBuf>,
    ) -> AppState {
        AppState {
            pool,
            api_key,
            started: unix_now(),
            request_timeout,
            slot_save_path,
            http_requests: AtomicU64::new(0),
            http_client_errors: AtomicU64::new(0),
            http_server_errors: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            ids: AtomicU64::new(0),
            thinking: ThinkingOptions::default(),
            log: LogOptions::default(),
            responses: Conversations::default(),
        }
    }

    /// With this request log (`-v`, `--log-format`).
    pub fn with_log(mut self, log: LogOptions) -> AppState {
        self.log = log;
        self
    }

    /// With these thinking settings (`--reasoning-format`, `--reasoning-budget`,
    /// `--chat-template-kwargs`).
    pub fn with_thinking(mut self, thinking: ThinkingOptions) -> AppState {
        self.thinking = thinking;
        self
    }

    /// The engine serving a request's `model` (see [`ModelPool::get`]).
    pub async fn engine(&self, model: Option<&str>) -> Result<Arc<Engine>, ApiError> {
        self.pool.get(model, false).await
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
