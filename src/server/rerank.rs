//! Reranking: `POST /v1/rerank` (and `/rerank`, `/v1/reranking`, `/reranking`), as llama-server
//! answers it. A reranker model (rank pooling: Qwen3-Reranker, say) scores each document
//! against the query in the shared embedding context; the documents come back ordered best
//! first. Jina's and Cohere's request shape (`documents`, `top_n`, `return_documents`) gives
//! `results` with `relevance_score`; Hugging Face TEI's (`texts`, `return_text`) a bare list
//! with `score`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use super::api;
use super::embeddings::for_each_hidden;
use super::engine::Engine;
use super::error::ApiError;
use super::routes::{body_bytes, App};
use crate::model::Model;
use crate::tokenizer::TokenId;

/// Most documents in one request (Cohere's limit).
const MAX_DOCUMENTS: usize = 1000;

#[derive(Deserialize)]
pub struct RerankRequest {
    model: Option<String>,
    query: Option<Value>,
    documents: Option<Vec<Value>>,
    /// TEI's name for the documents; its answer is a bare list.
    texts: Option<Vec<Value>>,
    top_n: Option<i64>,
    /// Jina and Cohere: each result carries `document: {text}`.
    #[serde(default)]
    return_documents: bool,
    /// TEI: each result carries `text`.
    #[serde(default)]
    return_text: bool,
}

pub async fn rerank(
    axum::extract::State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let req: RerankRequest = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let model = Arc::clone(engine.scheduler.model());
    let query = match &req.query {
        Some(Value::String(q)) => q.clone(),
        Some(_) => {
            return Err(ApiError::bad_request(
                "query is a string".into(),
                Some("query"),
            ))
        }
        None => {
            return Err(ApiError::bad_request(
                "query is required".into(),
                Some("query"),
            ))
        }
    };
    let tei = req.texts.is_some();
    let param = if tei { "texts" } else { "documents" };
    let documents = document_texts(req.texts.or(req.documents).unwrap_or_default(), param)?;
    let top_n = match req.top_n {
        None => documents.len(),
        Some(n) if n >= 1 => usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(documents.len()),
        Some(n) => {
            return Err(ApiError::bad_request(
                format!("top_n is at least 1, not {n}"),
                Some("top_n"),
            ))
        }
    };
    if model.weights.rank_head.is_none() {
        return Err(ApiError::not_implemented(format!(
            "{} is not a reranker: its file does not give rank pooling ({}.pooling_type 4)",
            engine.model_id, model.arch.name
        )));
    }
    let prompts: Vec<Vec<TokenId>> = documents
        .iter()
        .map(|doc| rerank_prompt(&model, &query, doc))
        .collect();
    let n_ctx = engine.scheduler.params().n_ctx;
    if let Some((i, p)) = prompts.iter().enumerate().find(|(_, p)| p.len() > n_ctx) {
        return Err(ApiError::bad_request(
            format!(
                "the query with document {i} is {} tokens; at most {n_ctx}",
                p.len()
            ),
            Some(param),
        )
        .with_code("context_length_exceeded"));
    }
    let n_tokens: usize = prompts.iter().map(Vec::len).sum();
    let scores = score_all(&engine, prompts).await?;

    let mut order: Vec<usize> = (0..documents.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order.truncate(top_n);
    let results: Vec<Value> = order
        .into_iter()
        .map(|i| {
            let mut r = json!({ "index": i });
            if tei {
                r["score"] = json!(scores[i]);
                if req.return_text {
                    r["text"] = json!(documents[i]);
                }
            } else {
                r["relevance_score"] = json!(scores[i]);
                if req.return_documents {
                    r["document"] = json!({ "text": documents[i] });
                }
            }
            r
        })
        .collect();
    if tei {
        return Ok(Json(Value::Array(results)).into_response());
    }
    Ok(Json(json!({
        "model": req.model.unwrap_or_else(|| engine.model_id.clone()),
        "object": "list",
        "usage": { "prompt_tokens": n_tokens, "total_tokens": n_tokens },
        "results": results,
    }))
    .into_response())
}

/// The documents' texts: strings, or objects with a `text` (Jina's shape).
fn document_texts(items: Vec<Value>, param: &str) -> Result<Vec<String>, ApiError> {
    let bad = |m: String| ApiError::bad_request(m, Some(param));
    if items.is_empty() || items.len() > MAX_DOCUMENTS {
        return Err(bad(format!("give 1 to {MAX_DOCUMENTS} documents")));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s),
            Value::Object(mut o) => match o.remove("text") {
                Some(Value::String(s)) => Ok(s),
                _ => Err(bad(format!("document {i} has no text"))),
            },
            _ => Err(bad(format!(
                "document {i} is not a string or {{\"text\": ...}}"
            ))),
        })
        .collect()
}

/// What a reranker reads for one document, as llama-server lays it out: the model's `rerank`
/// template with `{query}` and `{document}` filled in (special tokens parsed), else
/// [BOS] query [EOS] [SEP] document [EOS], each where the vocabulary adds it.
fn rerank_prompt(model: &Model, query: &str, document: &str) -> Vec<TokenId> {
    let tok = &model.tokenizer;
    if let Some(template) = model.gguf.get_str("tokenizer.chat_template.rerank") {
        let text = template
            .replace("{query}", query)
            .replace("{document}", document);
        return tok.encode(&text, false, true);
    }
    let eos = tok.eos().or(tok.sep()).filter(|_| tok.add_eos());
    let mut ids = Vec::new();
    ids.extend(tok.bos().filter(|_| tok.add_bos()));
    ids.extend(tok.encode(query, false, false));
    ids.extend(eos);
    ids.extend(tok.sep().filter(|_| tok.add_sep()));
    ids.extend(tok.encode(document, false, false));
    ids.extend(eos);
    ids
}

/// Each prompt's score, evaluated one at a time in the shared embedding context.
async fn score_all(engine: &Arc<Engine>, prompts: Vec<Vec<TokenId>>) -> Result<Vec<f32>, ApiError> {
    for_each_hidden(engine, prompts, "reranking", |model, hidden| {
        let head = (model.weights.rank_head.as_ref()).expect("checked by the caller");
        head.score(hidden, model.hparams.n_embd)
    })
    .await
}
