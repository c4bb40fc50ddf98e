//! Embeddings: `POST /v1/embeddings` (OpenAI) and Ollama's `/api/embed` and `/api/embeddings`.
//! A context of their own, made on first use and shared by these requests one at a time,
//! evaluates each input and pools its hidden states (the model's pooling type, mean when it
//! records none), normalised to unit length.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::model::{Context, ContextParams, Model, Pooling};
use crate::tokenizer::TokenId;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::api;
use super::engine::Engine;
use super::error::ApiError;
use super::ollama::OllamaError;
use super::routes::{body_bytes, App};

/// Most inputs in one request (OpenAI's limit).
const MAX_INPUTS: usize = 2048;

/// The embedding context, made on first use.
#[derive(Default)]
pub struct Embedder(Mutex<Option<Context>>);

#[derive(Deserialize)]
pub struct OpenAiRequest {
    input: Value,
    model: Option<String>,
    encoding_format: Option<String>,
    dimensions: Option<u64>,
}

pub async fn openai(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let req: OpenAiRequest = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let n_embd = engine.scheduler.model().hparams.n_embd;
    if req.dimensions.is_some_and(|d| d != n_embd as u64) {
        return Err(ApiError::bad_request(
            format!("this model's embeddings have {n_embd} dimensions"),
            Some("dimensions"),
        ));
    }
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                format!("encoding_format {other:?} is not float or base64"),
                Some("encoding_format"),
            ))
        }
    };
    let inputs = token_inputs(&engine, &req.input, "input")?;
    let n_tokens: usize = inputs.iter().map(Vec::len).sum();
    let vectors = embed_all(&engine, inputs).await?;
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                json!(base64_f32(v))
            } else {
                json!(v)
            };
            json!({ "object": "embedding", "index": i, "embedding": embedding })
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": req.model.unwrap_or_else(|| engine.model_id.clone()),
        "usage": { "prompt_tokens": n_tokens, "total_tokens": n_tokens },
    }))
    .into_response())
}

#[derive(Deserialize)]
pub struct OllamaEmbed {
    input: Option<Value>,
    /// `/api/embeddings` (the older endpoint) sends one `prompt`.
    prompt: Option<String>,
    model: Option<String>,
}

pub async fn ollama_embed(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    let started = Instant::now();
    let req: OllamaEmbed = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let input = req.input.unwrap_or(Value::Null);
    let inputs = token_inputs(&engine, &input, "input")?;
    let n_tokens: usize = inputs.iter().map(Vec::len).sum();
    let vectors = embed_all(&engine, inputs).await?;
    Ok(Json(json!({
        "model": req.model.unwrap_or_else(|| engine.model_id.clone()),
        "embeddings": vectors,
        "total_duration": started.elapsed().as_nanos() as u64,
        "load_duration": 0,
        "prompt_eval_count": n_tokens,
    }))
    .into_response())
}

pub async fn ollama_embeddings(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    let req: OllamaEmbed = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let prompt = Value::String(req.prompt.unwrap_or_default());
    let inputs = token_inputs(&engine, &prompt, "prompt")?;
    let mut vectors = embed_all(&engine, inputs).await?;
    Ok(Json(json!({ "embedding": vectors.remove(0) })).into_response())
}

/// A string, a list of strings, a list of token ids, or a list of such lists; each input
/// tokenized, non-empty and no longer than a slot's context.
fn token_inputs(
    engine: &Engine,
    input: &Value,
    param: &str,
) -> Result<Vec<Vec<TokenId>>, ApiError> {
    let bad = |m: String| ApiError::bad_request(m, Some(param));
    let n_vocab = engine.scheduler.model().hparams.n_vocab;
    let ids = |v: &[Value]| -> Option<Vec<TokenId>> {
        v.iter()
            .map(|t| {
                t.as_u64()
                    .filter(|&t| t < n_vocab as u64)
                    .map(|t| t as TokenId)
            })
            .collect()
    };
    let inputs: Vec<Vec<TokenId>> = match input {
        Value::String(s) => vec![engine.tokenize_plain(s)],
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_number) => {
            vec![ids(items).ok_or_else(|| bad(format!("token ids are in 0..{n_vocab}")))?]
        }
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(engine.tokenize_plain(s)),
                Value::Array(t) => {
                    ids(t).ok_or_else(|| bad(format!("token ids are in 0..{n_vocab}")))
                }
                _ => Err(bad("each input is a string or a list of token ids".into())),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(bad(format!(
                "{param} is a string, a list of strings or of token ids"
            )))
        }
    };
    if inputs.is_empty() || inputs.len() > MAX_INPUTS {
        return Err(bad(format!("give 1 to {MAX_INPUTS} inputs")));
    }
    let n_ctx = engine.scheduler.params().n_ctx;
    for (i, t) in inputs.iter().enumerate() {
        if t.is_empty() {
            return Err(bad(format!("input {i} is empty")));
        }
        if t.len() > n_ctx {
            return Err(
                bad(format!("input {i} has {} tokens; at most {n_ctx}", t.len()))
                    .with_code("context_length_exceeded"),
            );
        }
    }
    Ok(inputs)
}

/// Embeds each input on a blocking thread, in the shared embedding context.
async fn embed_all(
    engine: &Arc<Engine>,
    inputs: Vec<Vec<TokenId>>,
) -> Result<Vec<Vec<f32>>, ApiError> {
    for_each_hidden(engine, inputs, "embedding", |model, hidden| {
        Pooling::of_model(model).pool(hidden, model.hparams.n_embd)
    })
    .await
}

/// `of(model, hidden)` for each input's final hidden states ([n_tokens, n_embd]), evaluated
/// one at a time on a blocking thread in the engine's embedding context (made on first use),
/// which requests for embeddings and reranking share. `what` names the work in errors.
pub(super) async fn for_each_hidden<T: Send + 'static>(
    engine: &Arc<Engine>,
    inputs: Vec<Vec<TokenId>>,
    what: &'static str,
    of: impl Fn(&Model, &[f32]) -> T + Send + 'static,
) -> Result<Vec<T>, ApiError> {
    let engine = Arc::clone(engine);
    tokio::task::spawn_blocking(move || {
        let mut slot = engine.embedder.0.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            let p = engine.scheduler.params();
            let params = ContextParams {
                n_ctx: p.n_ctx,
                n_threads: p.n_threads,
                n_batch: p.n_batch,
                ..ContextParams::default()
            };
            let ctx = Context::new(Arc::clone(engine.scheduler.model()), &params)
                .map_err(|e| ApiError::server(format!("no {what} context: {e}")))?;
            *slot = Some(ctx);
        }
        let ctx = slot.as_mut().expect("made above");
        let model = Arc::clone(ctx.model());
        (inputs.iter())
            .map(|tokens| {
                let hidden = (ctx.embed(0, tokens))
                    .map_err(|e| ApiError::server(format!("{what} failed: {e}")))?;
                Ok(of(&model, &hidden))
            })
            .collect()
    })
    .await
    .map_err(|e| ApiError::server(format!("the {what} task failed: {e}")))?
}

/// Little-endian f32 bytes in base64 (OpenAI's `encoding_format: "base64"`).
fn base64_f32(v: &[f32]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        // 1.0f32 = 00 00 80 3f; 0.5 = 00 00 00 3f.
        assert_eq!(super::base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(super::base64_f32(&[1.0, 0.5]), "AACAPwAAAD8=");
    }
}
