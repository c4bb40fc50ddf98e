//! The OpenAI- and Ollama-compatible HTTP server over the continuous-batching scheduler
//! (feature `server`; `kolibri serve` is its command line).
//!
//! Threads: the scheduler thread (with the context's compute workers) runs every forward pass;
//! a small tokio runtime handles HTTP. Handlers only parse, tokenize, queue and relay events.
//!
//! Safe by default: the key is compared in constant time, and body size, prompt length (the
//! slot's context), waiting requests (429 with Retry-After), time per request, open connections
//! and slow clients are all limited.
//!
//! [`router`] is the whole HTTP surface as an axum `Router` (tests and fuzzing drive it in
//! process); [`listener::serve`] runs it on a socket with the connection limits.

mod anthropic;
mod api;
mod catalog;
mod embeddings;
mod engine;
mod error;
mod infill;
pub mod listener;
mod logprobs;
mod metrics;
mod models;
mod ollama;
mod page;
mod pool;
mod reply;
mod request_log;
mod rerank;
mod responses;
mod routes;
mod slots;
mod state;
mod stream;
mod tools;
mod translate;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::Router;

pub use engine::Engine;
pub use pool::{Loader, ModelPool};
pub use reply::ThinkingOptions;
pub use request_log::{ClientAddr, LogFormat, LogOptions};
pub use state::AppState;

/// Identifies this build in responses (`system_fingerprint`).
pub const FINGERPRINT: &str = concat!("kolibri-", env!("CARGO_PKG_VERSION"));

/// Every endpoint, with the body-size and body-time limits and the request counters.
pub fn router(app: Arc<AppState>, max_body: usize, read_timeout: Duration) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/app.css", get(page::style))
        .route("/libraries.js", get(page::libraries))
        .route("/highlight.css", get(page::highlight_style))
        .route("/licenses.txt", get(page::licenses))
        .route("/favicon.svg", get(page::icon))
        .route("/favicon.ico", get(page::icon))
        .route("/health", get(routes::health))
        .route("/metrics", get(routes::metrics))
        .route("/v1/models", get(models::list_models))
        .route("/v1/models/{id}", get(models::get_model))
        .route("/v1/completions", post(routes::completions))
        .route("/v1/chat/completions", post(routes::chat_completions))
        .route("/slots/{id}", post(slots::slot_action))
        .route("/api/version", get(ollama::version))
        .route("/api/tags", get(models::tags))
        .route("/api/ps", get(models::ps))
        .route("/api/show", post(models::show))
        .route("/api/pull", post(models::pull))
        .route("/api/delete", delete(models::delete))
        .route("/api/chat", post(ollama::chat))
        .route("/api/generate", post(ollama::generate))
        .route("/api/embed", post(embeddings::ollama_embed))
        .route("/api/embeddings", post(embeddings::ollama_embeddings))
        .route("/v1/embeddings", post(embeddings::openai))
        .route("/infill", post(infill::infill))
        .route("/v1/rerank", post(rerank::rerank))
        .route("/v1/reranking", post(rerank::rerank))
        .route("/v1/responses", post(responses::create))
        .route("/responses", post(responses::create))
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
        // Without `/v1`, as llama-server also answers and some clients call.
        .route("/models", get(models::list_models))
        .route("/completions", post(routes::completions))
        .route("/chat/completions", post(routes::chat_completions))
        .route("/embeddings", post(embeddings::openai))
        .route("/rerank", post(rerank::rerank))
        .route("/reranking", post(rerank::rerank))
        .route("/tokenize", post(routes::tokenize))
        .route("/detokenize", post(routes::detokenize))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(move |req, next| {
            listener::body_in_time(read_timeout, max_body, req, next)
        }))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), count))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            request_log::log_requests,
        ))
        .with_state(app)
}

/// Counts requests and error responses for `/metrics`.
async fn count(State(app): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    app.http_requests.fetch_add(1, Relaxed);
    let response = next.run(req).await;
    if response.status().is_client_error() {
        app.http_client_errors.fetch_add(1, Relaxed);
    } else if response.status().is_server_error() {
        app.http_server_errors.fetch_add(1, Relaxed);
    }
    response
}
