//! The HTTP endpoints: models, completions, chat completions, health and metrics.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use crate::batching::{Completion, Event, Failure, FinishReason, Request, SubmitError};
use crate::tokenizer::TokenId;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::{self, ChatRequest, Checked, CompletionRequest, Prompt};
use super::engine::Engine;
use super::error::ApiError;
use super::reply::{self, ReplyFormat, WholeReply};
use super::state::AppState;
use super::stream::{self, ChannelSink, Flavor};
use super::{logprobs, tools};
use crate::grammar::{Constraint, ConstraintSpec};

pub type App = State<Arc<AppState>>;

pub async fn health(State(app): App) -> Response {
    let engines = app.pool.resident();
    let sum = |f: &dyn Fn(&Engine) -> u64| engines.iter().map(|e| f(e)).sum::<u64>();
    Json(json!({
        "status": "ok",
        "slots_busy": sum(&|e| e.scheduler.stats().slots_busy.load(Relaxed)),
        "slots": sum(&|e| e.scheduler.params().n_slots as u64),
        "queue_depth": sum(&|e| e.scheduler.stats().queue_depth.load(Relaxed)),
        "models_loaded": engines.len(),
    }))
    .into_response()
}

pub async fn metrics(State(app): App, headers: HeaderMap) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        super::metrics::render(&app),
    )
        .into_response())
}

/// A body that is too large or unreadable gets the same JSON error shape as everything else.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|e| ApiError {
        status: e.status(),
        ..ApiError::bad_request(e.body_text(), None)
    })
}

pub async fn chat_completions(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let req: ChatRequest = api::parse(&body_bytes(body)?)?;
    let chat = prepare_chat(&app, req).await?;
    let (engine, prompt, checked, model) = (chat.engine, chat.prompt, chat.checked, chat.model);
    generate(&app, &engine, prompt, checked, Flavor::Chat, model, None).await
}

/// A chat request made ready to generate: its model, its prompt rendered and tokenized, its
/// checked settings, and the model name to answer with.
pub struct PreparedChat {
    pub engine: Arc<Engine>,
    pub prompt: Vec<TokenId>,
    pub checked: Checked,
    pub model: String,
}

/// Checks a chat request and renders its prompt through the model's template.
pub async fn prepare_chat(app: &AppState, req: ChatRequest) -> Result<PreparedChat, ApiError> {
    let engine = app.engine(req.model.as_deref()).await?;
    let mut checked = req.sampling.check(app.random_seed())?;
    let tools = tools::setup(req.tools.as_ref(), req.tool_choice.as_ref())?;
    if let Some(spec) = tools.constraint.clone() {
        if checked.constraint.is_some() {
            return Err(ApiError::bad_request(
                "a required tool call cannot be combined with response_format or grammar".into(),
                Some("tool_choice"),
            ));
        }
        checked.constraint = Some((spec, "tool_choice"));
    }
    if req.messages.is_empty() {
        return Err(ApiError::bad_request(
            "messages must not be empty".into(),
            Some("messages"),
        ));
    }
    let template = engine.template.as_ref().map_err(|e| {
        ApiError::bad_request(
            format!("this model cannot chat: {e}; use /v1/completions"),
            None,
        )
    })?;
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| m.template_json())
        .collect::<Result<_, _>>()?;
    let budget = req.reasoning_budget_tokens.or(req.thinking_budget_tokens);
    let mut thinking = app.thinking.overridden(
        req.reasoning_format.as_deref(),
        req.chat_template_kwargs.as_ref(),
        budget,
    )?;
    if let Some(effort) = &req.reasoning_effort {
        thinking.set_effort(effort);
    }
    let prepared = reply::prepare_chat(
        template,
        &engine.scheduler.model().tokenizer,
        &Value::Array(messages),
        tools.template_tools.as_ref(),
        &thinking,
        checked.constraint.is_some(),
    )?;
    let prompt = engine.tokenize(&prepared.rendered);
    let model = req.model.unwrap_or_else(|| engine.model_id.clone());
    checked.format = ReplyFormat {
        tools: tools.names(),
        ..prepared.format
    };
    checked.markup = prepared.markup;
    Ok(PreparedChat {
        engine,
        prompt,
        checked,
        model,
    })
}

pub async fn completions(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let req: CompletionRequest = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let checked = req.sampling.check(app.random_seed())?;
    let (prompt, text) = match req.prompt {
        // Fill in the middle: the prompt is the code before the gap, `suffix` the code after.
        Prompt::Text(t) if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) => {
            let gap = crate::tokenizer::infill::Infill {
                prefix: &t,
                suffix: req.suffix.as_deref().unwrap_or_default(),
                ..Default::default()
            };
            (
                super::infill::prompt_for(&engine, &gap, checked.max_tokens)?,
                t,
            )
        }
        _ if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) => {
            return Err(ApiError::bad_request(
                "suffix goes with one prompt string".into(),
                Some("suffix"),
            ))
        }
        Prompt::Text(t) => (engine.tokenize(&t), t),
        Prompt::Texts(mut v) if v.len() == 1 => {
            let t = v.remove(0);
            (engine.tokenize(&t), t)
        }
        Prompt::Texts(_) => {
            return Err(ApiError::bad_request(
                "exactly one prompt per request is supported".into(),
                Some("prompt"),
            ))
        }
        Prompt::Tokens(ids) => {
            let text = engine.scheduler.model().tokenizer.decode(&ids);
            (ids, text)
        }
    };
    let echo = req.echo.unwrap_or(false).then_some(text);
    let model = req.model.unwrap_or_else(|| engine.model_id.clone());
    generate(
        &app,
        &engine,
        prompt,
        checked,
        Flavor::Completion,
        model,
        echo,
    )
    .await
}

/// `flavor` names the field the prompt came from in the error's `param`.
fn submit_error(e: SubmitError, flavor: Flavor) -> ApiError {
    let prompt_param = match flavor {
        Flavor::Chat => "messages",
        Flavor::Completion => "prompt",
    };
    match e {
        SubmitError::QueueFull { .. } => ApiError::busy(e.to_string()),
        SubmitError::PromptTooLong { .. } => {
            ApiError::bad_request(e.to_string(), Some(prompt_param))
                .with_code("context_length_exceeded")
        }
        SubmitError::Stopped => ApiError::unavailable(e.to_string()),
        SubmitError::EmptyPrompt | SubmitError::InvalidToken { .. } => {
            ApiError::bad_request(e.to_string(), Some(prompt_param))
        }
        SubmitError::InvalidSampling(_) => ApiError::bad_request(e.to_string(), None),
        SubmitError::InvalidGroup(_) => ApiError::bad_request(e.to_string(), Some("n")),
    }
}

pub fn failure_error(f: &Failure) -> ApiError {
    match f {
        Failure::TimedOut => ApiError::timeout(f.to_string()),
        Failure::Engine(_) => ApiError::server(f.to_string()),
    }
}

/// What one response is: its id, endpoint flavor, model name and creation time.
pub struct ResponseMeta {
    pub id: String,
    pub flavor: Flavor,
    pub model: String,
    pub created: u64,
    /// How a chat reply is split into thinking, text and tool calls.
    pub format: ReplyFormat,
}

impl ResponseMeta {
    /// The id of the response's `index`-th tool call.
    pub fn call_id(&self, index: usize) -> String {
        format!("call_{}_{index}", self.id)
    }

    /// The fields every response object and stream chunk carries, around its `choices`.
    pub fn envelope(&self, object: &str, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": super::FINGERPRINT,
            "choices": choices,
        })
    }
}

pub async fn generate(
    app: &AppState,
    engine: &Arc<Engine>,
    prompt: Vec<TokenId>,
    checked: Checked,
    flavor: Flavor,
    model: String,
    echo: Option<String>,
) -> Result<Response, ApiError> {
    let receivers = start(app, engine, prompt, &checked, flavor).await?;
    let meta = ResponseMeta {
        id: app.next_id(flavor.id_prefix()),
        flavor,
        model,
        created: super::state::unix_now(),
        format: checked.format,
    };
    if checked.stream {
        let vocab = checked
            .logprobs
            .map(|_| Arc::clone(engine.scheduler.model()));
        return Ok(stream::response(
            meta,
            receivers,
            checked.include_usage,
            echo,
            vocab,
        ));
    }
    let mut choices = Vec::new();
    let mut total: Option<Completion> = None;
    for (index, mut rx) in receivers.into_iter().enumerate() {
        let mut text = echo.clone().unwrap_or_default();
        let mut entries = checked.logprobs.map(|_| Vec::new());
        let done = loop {
            match rx.recv().await {
                Some(Event::Logprobs(e)) => entries.get_or_insert_with(Vec::new).extend(e),
                Some(Event::Text(t)) => text.push_str(&t),
                Some(Event::Done(c)) => break c,
                Some(Event::Failed(f)) => return Err(failure_error(&f)),
                None => return Err(ApiError::server("generation ended without a result".into())),
            }
        };
        let mut choice = choice_json(&meta, index, &text, &done);
        if let Some(entries) = entries {
            let tokenizer = &engine.scheduler.model().tokenizer;
            choice["logprobs"] =
                logprobs::choice_logprobs(meta.flavor, tokenizer, &entries, &mut 0);
        }
        choices.push(choice);
        total = Some(match total {
            None => done,
            Some(mut sum) => {
                sum.completion_tokens += done.completion_tokens;
                sum
            }
        });
    }
    let mut response = meta.envelope(meta.flavor.object(), Value::Array(choices));
    response["usage"] = usage(&total.expect("at least one choice"));
    Ok(Json(response).into_response())
}

/// Compiles the request's constraint and queues it; its events arrive on the receiver.
/// `checked.n` choices (each with the seed after the previous one's) share the prompt.
pub async fn start(
    app: &AppState,
    engine: &Arc<Engine>,
    prompt: Vec<TokenId>,
    checked: &Checked,
    flavor: Flavor,
) -> Result<Vec<mpsc::UnboundedReceiver<Event>>, ApiError> {
    let constraint = match &checked.constraint {
        None => None,
        Some((spec, param)) => Some(compile_constraint(engine, spec.clone(), param).await?),
    };
    let deadline = Some(Instant::now() + app.request_timeout);
    let mut requests = Vec::with_capacity(checked.n);
    let mut receivers = Vec::with_capacity(checked.n);
    for i in 0..checked.n {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut sampling = checked.sampler.clone();
        sampling.seed = sampling.seed.wrapping_add(i as u64);
        requests.push(Request {
            constraint: constraint.clone(),
            logprobs: checked.logprobs,
            prompt: prompt.clone(),
            max_tokens: checked.max_tokens.unwrap_or(usize::MAX),
            sampling,
            stop: checked.stop.clone(),
            deadline,
            sink: Box::new(ChannelSink {
                events: tx,
                log: super::request_log::recorder(),
            }),
            markup: checked.markup.clone(),
        });
        receivers.push(rx);
    }
    engine
        .scheduler
        .submit_group(requests)
        .map_err(|e| submit_error(e, flavor))?;
    Ok(receivers)
}

/// Compiles on a blocking thread: a large schema can take milliseconds, which the async
/// threads that serve other clients should not wait for.
async fn compile_constraint(
    engine: &Arc<Engine>,
    spec: ConstraintSpec,
    param: &'static str,
) -> Result<Constraint, ApiError> {
    let engine = Arc::clone(engine);
    let compiled = tokio::task::spawn_blocking(move || engine.compile_constraint(&spec))
        .await
        .map_err(|e| ApiError::server(format!("compiling the constraint failed: {e}")))?;
    compiled.map_err(|e| ApiError::bad_request(e.to_string(), Some(param)))
}

/// The finish reason of a reply that ended in tool calls.
pub const TOOL_CALLS: &str = "tool_calls";

pub fn finish_reason(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
    }
}

pub fn usage(c: &Completion) -> Value {
    json!({
        "prompt_tokens": c.prompt_tokens,
        "completion_tokens": c.completion_tokens,
        "total_tokens": c.prompt_tokens + c.completion_tokens,
        "prompt_tokens_details": { "cached_tokens": c.cached_tokens },
    })
}

/// One finished choice: its text (and, in chat, its thinking and calls) and finish reason.
fn choice_json(meta: &ResponseMeta, index: usize, text: &str, c: &Completion) -> Value {
    let mut choice = match meta.flavor {
        Flavor::Chat => {
            let reply = WholeReply::split(&meta.format, text);
            let mut message = json!({ "role": "assistant", "content": reply.content });
            if !reply.reasoning.is_empty() {
                message["reasoning_content"] = json!(reply.reasoning);
            }
            let mut finish = finish_reason(c.finish);
            if !reply.calls.is_empty() {
                let calls: Vec<Value> = (reply.calls.iter().enumerate())
                    .map(|(i, call)| call.to_json(&meta.call_id(i), None))
                    .collect();
                message["tool_calls"] = Value::Array(calls);
                if reply.content.is_empty() {
                    message["content"] = Value::Null;
                }
                finish = TOOL_CALLS;
            }
            json!({
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish,
            })
        }
        Flavor::Completion => json!({
            "index": 0,
            "text": text,
            "logprobs": null,
            "finish_reason": finish_reason(c.finish),
        }),
    };
    choice["index"] = json!(index);
    choice
}

/// A 404 in the shape of the API the path belongs to: Ollama's `{"error": "..."}` under
/// `/api/`, OpenAI's elsewhere.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/") {
        let body = serde_json::json!({ "error": format!("404 page not found: {path}") });
        return (StatusCode::NOT_FOUND, Json(body)).into_response();
    }
    ApiError::not_found(format!("no such endpoint: {path}")).into_response()
}

pub async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        ..ApiError::bad_request("method not allowed on this endpoint".into(), None)
    }
}

#[derive(serde::Deserialize)]
pub struct TokenizeRequest {
    #[serde(default)]
    content: String,
    #[serde(default)]
    add_special: bool,
    #[serde(default)]
    with_pieces: bool,
    model: Option<String>,
}

/// llama-server's `POST /tokenize`: `{"content", "add_special", "with_pieces"}` to
/// `{"tokens": [id, ...]}` (or `[{"id", "piece"}, ...]`). Special-token text is parsed.
pub async fn tokenize(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let req: TokenizeRequest = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let tok = &engine.scheduler.model().tokenizer;
    let ids = tok.encode(&req.content, req.add_special, true);
    let tokens: Vec<Value> = if req.with_pieces {
        ids.iter()
            .map(|&id| {
                let bytes = tok.token_bytes(id, true);
                // A piece that is not whole UTF-8 goes as its bytes, as llama-server sends it.
                let piece = match String::from_utf8(bytes) {
                    Ok(s) => json!(s),
                    Err(e) => json!(e.into_bytes()),
                };
                json!({ "id": id, "piece": piece })
            })
            .collect()
    } else {
        ids.iter().map(|&id| json!(id)).collect()
    };
    Ok(Json(json!({ "tokens": tokens })).into_response())
}

#[derive(serde::Deserialize)]
pub struct DetokenizeRequest {
    #[serde(default)]
    tokens: Vec<u32>,
    model: Option<String>,
}

/// llama-server's `POST /detokenize`: `{"tokens": [...]}` to `{"content": "..."}`.
pub async fn detokenize(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let req: DetokenizeRequest = api::parse(&body_bytes(body)?)?;
    let engine = app.engine(req.model.as_deref()).await?;
    let tok = &engine.scheduler.model().tokenizer;
    let n_vocab = engine.scheduler.model().hparams.n_vocab;
    if let Some(bad) = req.tokens.iter().find(|&&t| t as usize >= n_vocab) {
        return Err(ApiError::bad_request(
            format!("token {bad} is not in 0..{n_vocab}"),
            Some("tokens"),
        ));
    }
    Ok(Json(json!({ "content": tok.decode(&req.tokens) })).into_response())
}
