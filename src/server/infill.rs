//! Fill-in-the-middle: llama-server's `/infill` (what llama.vim and llama.vscode call as a
//! user types), and `suffix` on `/v1/completions`. The prompt is laid out by
//! [`crate::tokenizer::infill`]; `/infill` answers in llama-server's own format (`content`,
//! `stop`, `tokens_predicted`, ...), streamed as server-sent events with `stream`.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::api::{self, Sampling};
use super::engine::Engine;
use super::error::ApiError;
use super::routes::{body_bytes, failure_error, start, App};
use super::stream::Flavor;
use crate::batching::{Completion, Event, FinishReason};
use crate::tokenizer::infill::{infill_prompt, missing_fim_tokens, ExtraFile, Infill};
use crate::tokenizer::TokenId;

#[derive(Deserialize)]
pub struct InfillRequest {
    model: Option<String>,
    input_prefix: Option<String>,
    input_suffix: Option<String>,
    #[serde(default)]
    input_extra: Vec<ExtraChunk>,
    prompt: Option<String>,
    /// llama-server's name for `max_tokens` (-1: no limit).
    n_predict: Option<i64>,
    #[serde(flatten)]
    sampling: Sampling,
}

#[derive(Deserialize)]
struct ExtraChunk {
    text: String,
    filename: Option<String>,
}

pub async fn infill(
    axum::extract::State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let mut req: InfillRequest = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let tokenizer = &engine.scheduler.model().tokenizer;
    let missing = missing_fim_tokens(tokenizer);
    if !missing.is_empty() {
        let names = missing.join(", ");
        return Err(ApiError::not_implemented(format!(
            "infill is not supported by this model: its {names} token is missing"
        )));
    }
    let required = |field: Option<String>, name: &str| {
        field.ok_or_else(|| ApiError::bad_request(format!("\"{name}\" is required"), Some(name)))
    };
    let prefix = required(req.input_prefix.take(), "input_prefix")?;
    let suffix = required(req.input_suffix.take(), "input_suffix")?;
    if let (Some(n), None) = (req.n_predict, req.sampling.max_tokens) {
        req.sampling.max_tokens = u64::try_from(n).ok();
    }
    let checked = req.sampling.check(app.random_seed())?;
    if checked.n != 1 {
        return Err(ApiError::bad_request(
            "/infill makes one completion (n = 1)".into(),
            Some("n"),
        ));
    }
    let extra: Vec<ExtraFile> = req
        .input_extra
        .into_iter()
        .map(|c| ExtraFile {
            filename: c.filename.unwrap_or_else(|| "tmp".into()),
            text: c.text,
        })
        .collect();
    let request = Infill {
        prefix: &prefix,
        suffix: &suffix,
        prompt: req.prompt.as_deref().unwrap_or(""),
        extra: &extra,
    };
    let prompt = prompt_for(&engine, &request, checked.max_tokens)?;
    let n_prompt = prompt.len();
    let rx = start(&app, &engine, prompt, &checked, Flavor::Completion)
        .await?
        .remove(0);
    let model = req.model.unwrap_or_else(|| engine.model_id.clone());
    match checked.stream {
        true => Ok(streamed(rx, model, n_prompt)),
        false => whole(rx, model, n_prompt).await,
    }
}

/// The FIM prompt of `request` for one of `engine`'s slots (the model's FIM tokens checked).
pub fn prompt_for(
    engine: &Engine,
    request: &Infill,
    max_tokens: Option<usize>,
) -> Result<Vec<TokenId>, ApiError> {
    let tokenizer = &engine.scheduler.model().tokenizer;
    let n_ctx = engine.scheduler.params().n_ctx;
    infill_prompt(tokenizer, request, n_ctx, max_tokens)
        .map_err(|e| ApiError::bad_request(e, Some("suffix")))
}

async fn whole(
    mut rx: UnboundedReceiver<Event>,
    model: String,
    n_prompt: usize,
) -> Result<Response, ApiError> {
    let mut content = String::new();
    loop {
        match rx.recv().await {
            Some(Event::Text(t)) => content.push_str(&t),
            Some(Event::Logprobs(_)) => {}
            Some(Event::Done(c)) => {
                return Ok(Json(last(&content, &model, n_prompt, &c)).into_response())
            }
            Some(Event::Failed(f)) => return Err(failure_error(&f)),
            None => return Err(ApiError::server("generation ended without a result".into())),
        }
    }
}

/// `data: {"content": PIECE, "stop": false}` per piece, then the last object with `stop`.
fn streamed(rx: UnboundedReceiver<Event>, model: String, n_prompt: usize) -> Response {
    let events = futures_util::stream::unfold(Some(rx), move |rx| {
        let model = model.clone();
        async move {
            let mut rx = rx?;
            loop {
                let value = match rx.recv().await {
                    Some(Event::Logprobs(_)) => continue,
                    Some(Event::Text(t)) => {
                        let piece = json!({"index": 0, "content": t, "stop": false});
                        return Some((Ok::<_, Infallible>(sse(&piece)), Some(rx)));
                    }
                    Some(Event::Done(c)) => last("", &model, n_prompt, &c),
                    Some(Event::Failed(f)) => json!({"error": failure_error(&f).message}),
                    None => return None,
                };
                return Some((Ok(sse(&value)), None));
            }
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(events),
    )
        .into_response()
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// llama-server's final object of a completion.
fn last(content: &str, model: &str, n_prompt: usize, c: &Completion) -> Value {
    let predicted_ms = c
        .total_time
        .saturating_sub(c.time_to_first_token)
        .as_secs_f64()
        * 1e3;
    json!({
        "index": 0,
        "content": content,
        "stop": true,
        "model": model,
        "tokens_predicted": c.completion_tokens,
        "tokens_evaluated": n_prompt,
        "tokens_cached": c.cached_tokens,
        "truncated": false,
        "stop_type": match c.finish { FinishReason::Stop => "eos", FinishReason::Length => "limit" },
        "stopping_word": "",
        "timings": {
            "prompt_n": c.prompt_tokens - c.cached_tokens,
            "prompt_ms": c.time_to_first_token.as_secs_f64() * 1e3,
            "predicted_n": c.completion_tokens,
            "predicted_ms": predicted_ms,
            "predicted_per_second": c.completion_tokens as f64 * 1e3 / predicted_ms.max(1e-6),
        },
    })
}
