//! Ollama's API on the same port (`/api/*`), for the clients that speak it (the `ollama`
//! packages, Open WebUI, editor plugins): chat and generate streamed as NDJSON with Ollama's
//! nanosecond durations, the model list, `show` with the GGUF's metadata, `ps`, `version`.
//! Errors are Ollama's `{"error": "..."}` with the same status codes as the OpenAI side.

use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::batching::{Completion, Event};
use crate::grammar::ConstraintSpec;
use crate::sampling::SamplerParams;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::api::{self, Checked};
use super::error::ApiError;
use super::reply::{self, ReplyFormat, ReplyPiece, ReplySplitter, ThinkingOptions, WholeReply};
use super::routes::{body_bytes, failure_error, start, App};
use super::state::AppState;
use super::stream::Flavor;
use super::tools;

/// The Ollama API version this server answers as (what clients compare against).
const OLLAMA_VERSION: &str = "0.12.0";

/// An [`ApiError`] in Ollama's body.
pub struct OllamaError(ApiError);

impl From<ApiError> for OllamaError {
    fn from(e: ApiError) -> Self {
        OllamaError(e)
    }
}

impl IntoResponse for OllamaError {
    fn into_response(self) -> Response {
        let status = self.0.status;
        (status, Json(json!({ "error": self.0.message }))).into_response()
    }
}

type Result<T> = std::result::Result<T, OllamaError>;

pub async fn version() -> Response {
    Json(json!({ "version": OLLAMA_VERSION })).into_response()
}

/// Ollama's `options`: its names, its defaults.
#[derive(Deserialize, Default)]
struct Options {
    temperature: Option<f32>,
    top_k: Option<i64>,
    top_p: Option<f32>,
    min_p: Option<f32>,
    seed: Option<i64>,
    num_predict: Option<i64>,
    repeat_penalty: Option<f32>,
    repeat_last_n: Option<i64>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    stop: Option<Vec<String>>,
}

#[derive(Deserialize)]
pub struct ChatRequest {
    model: Option<String>,
    #[serde(default)]
    messages: Vec<Value>,
    tools: Option<Value>,
    format: Option<Value>,
    /// `true`/`false`, or an effort (`"low"`, `"medium"`, `"high"`).
    think: Option<Value>,
    #[serde(default)]
    options: Options,
    stream: Option<bool>,
}

#[derive(Deserialize)]
pub struct GenerateRequest {
    model: Option<String>,
    #[serde(default)]
    prompt: String,
    system: Option<String>,
    #[serde(default)]
    raw: bool,
    format: Option<Value>,
    think: Option<Value>,
    #[serde(default)]
    options: Options,
    stream: Option<bool>,
    /// How long the model stays loaded; with no prompt, `0` unloads it now.
    keep_alive: Option<Value>,
}

/// Whether `keep_alive` says zero (`0`, `"0"`, `"0s"`, `"0m"`): unload now.
fn unload_now(keep_alive: Option<&Value>) -> bool {
    match keep_alive {
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => {
            let digits = s.trim().trim_end_matches(['s', 'm', 'h']);
            digits.parse::<f64>().is_ok_and(|v| v == 0.0)
        }
        _ => false,
    }
}

pub async fn chat(
    State(app): App,
    headers: HeaderMap,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response> {
    app.authorize(&headers)?;
    let started = SystemTime::now();
    let req: ChatRequest = api::parse(&body_bytes(body)?)?;
    let engine = app.pool.get(req.model.as_deref(), true).await?;
    if req.messages.is_empty() {
        // Ollama answers an empty chat as "model loaded".
        return Ok(Json(json!({
            "model": engine.model_id, "created_at": rfc3339(now()),
            "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "load",
        }))
        .into_response());
    }
    let tools = tools::setup(req.tools.as_ref(), None)?;
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(message_for_template)
        .collect::<std::result::Result<_, _>>()?;
    let template = engine
        .template
        .as_ref()
        .map_err(|e| ApiError::bad_request(format!("this model cannot chat: {e}"), None))?;
    let mut checked = checked(&req.options, req.format.as_ref())?;
    let prepared = reply::prepare_chat(
        template,
        &engine.scheduler.model().tokenizer,
        &Value::Array(messages),
        tools.template_tools.as_ref(),
        &thinking(&app, req.think.as_ref())?,
        checked.constraint.is_some(),
    )?;
    checked.format = ReplyFormat {
        tools: tools.names(),
        ..prepared.format
    };
    checked.markup = prepared.markup;
    let prompt = engine.tokenize(&prepared.rendered);
    let rx = start(&app, &engine, prompt, &checked, Flavor::Chat)
        .await?
        .remove(0);
    let reply = Reply {
        model: req.model.unwrap_or_else(|| engine.model_id.clone()),
        chat: true,
        started,
        splitter: ReplySplitter::new(&checked.format),
    };
    Ok(respond(reply, rx, req.stream.unwrap_or(true)).await?)
}

pub async fn generate(
    State(app): App,
    headers: HeaderMap,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response> {
    app.authorize(&headers)?;
    let started = SystemTime::now();
    let req: GenerateRequest = api::parse(&body_bytes(body)?)?;
    // No prompt and `keep_alive: 0`: Ollama's way to unload a model.
    if req.prompt.is_empty() && unload_now(req.keep_alive.as_ref()) {
        let name = req.model.clone().unwrap_or_default();
        let unloaded = app.pool.unload_named(&name).await;
        return Ok(Json(json!({
            "model": name, "created_at": rfc3339(now()), "response": "", "done": true,
            "done_reason": if unloaded { "unload" } else { "load" },
        }))
        .into_response());
    }
    let engine = app.pool.get(req.model.as_deref(), true).await?;
    let mut checked = checked(&req.options, req.format.as_ref())?;
    // Ollama wraps the prompt in the model's chat template unless `raw` (or no template).
    let text = match (&engine.template, req.raw) {
        (Ok(template), false) => {
            let mut messages = Vec::new();
            if let Some(system) = &req.system {
                messages.push(json!({"role": "system", "content": system}));
            }
            messages.push(json!({"role": "user", "content": req.prompt}));
            let prepared = reply::prepare_chat(
                template,
                &engine.scheduler.model().tokenizer,
                &Value::Array(messages),
                None,
                &thinking(&app, req.think.as_ref())?,
                checked.constraint.is_some(),
            )
            .map_err(|e| ApiError::bad_request(e.message, Some("prompt")))?;
            checked.format = prepared.format;
            checked.markup = prepared.markup;
            prepared.rendered
        }
        _ => req.prompt.clone(),
    };
    if text.is_empty() {
        return Ok(Json(json!({
            "model": engine.model_id, "created_at": rfc3339(now()), "response": "",
            "done": true, "done_reason": "load",
        }))
        .into_response());
    }
    let prompt = engine.tokenize(&text);
    let rx = start(&app, &engine, prompt, &checked, Flavor::Completion)
        .await?
        .remove(0);
    let reply = Reply {
        model: req.model.unwrap_or_else(|| engine.model_id.clone()),
        chat: false,
        started,
        splitter: ReplySplitter::new(&checked.format),
    };
    Ok(respond(reply, rx, req.stream.unwrap_or(true)).await?)
}

/// The server's thinking settings under a request's `think`: on or off (the template's
/// `enable_thinking`), or an effort for templates that read `reasoning_effort`.
fn thinking(
    app: &AppState,
    think: Option<&Value>,
) -> std::result::Result<ThinkingOptions, ApiError> {
    let mut opts = app.thinking.clone();
    match think {
        None | Some(Value::Null) => {}
        Some(Value::Bool(on)) => {
            opts.kwargs.insert("enable_thinking".into(), json!(on));
        }
        Some(Value::String(effort)) if ["low", "medium", "high"].contains(&effort.as_str()) => {
            opts.kwargs.insert("enable_thinking".into(), json!(true));
            opts.set_effort(effort);
        }
        Some(other) => {
            return Err(ApiError::bad_request(
                format!("think is true, false, \"low\", \"medium\" or \"high\", not {other}"),
                Some("think"),
            ))
        }
    }
    Ok(opts)
}

/// A message as the template reads it: Ollama already sends call arguments as objects.
fn message_for_template(m: &Value) -> std::result::Result<Value, ApiError> {
    let bad = |what: &str| ApiError::bad_request(what.into(), Some("messages"));
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("a message needs a role"))?;
    let mut out = Map::new();
    out.insert("role".into(), json!(role));
    let content = match m.get("content") {
        None | Some(Value::Null) => json!(""),
        Some(Value::String(s)) => json!(s),
        Some(_) => return Err(bad("message content must be a string")),
    };
    out.insert("content".into(), content);
    if let Some(calls) = m.get("tool_calls").filter(|c| !c.is_null()) {
        out.insert("tool_calls".into(), calls.clone());
    }
    if let Some(name) = m.get("tool_name").or_else(|| m.get("name")) {
        out.insert("name".into(), name.clone());
    }
    if let Some(thinking) = m.get("thinking").and_then(Value::as_str) {
        api::add_thinking(&mut out, thinking);
    }
    Ok(Value::Object(out))
}

/// Ollama's options and `format` as a checked request (Ollama's defaults: temperature 0.8,
/// top-k 40, top-p 0.9, repeat penalty 1.1 over the last 64 tokens).
fn checked(o: &Options, format: Option<&Value>) -> std::result::Result<Checked, ApiError> {
    let bad = |m: String| ApiError::bad_request(m, Some("options"));
    let sampler = SamplerParams {
        temperature: o.temperature.unwrap_or(0.8),
        top_k: o.top_k.unwrap_or(40).max(0) as usize,
        top_p: o.top_p.unwrap_or(0.9),
        min_p: o.min_p.unwrap_or(0.0),
        repeat_penalty: o.repeat_penalty.unwrap_or(1.1),
        frequency_penalty: o.frequency_penalty.unwrap_or(0.0),
        presence_penalty: o.presence_penalty.unwrap_or(0.0),
        penalty_last_n: match o.repeat_last_n.unwrap_or(64) {
            -1 => usize::MAX,
            n => n.max(0) as usize,
        },
        seed: o.seed.map_or_else(|| now().as_nanos() as u64, |s| s as u64),
    };
    sampler.validate().map_err(|e| bad(e.to_string()))?;
    let constraint = match format {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "json" => Some(ConstraintSpec::JsonObject),
        Some(Value::String(s)) if s.is_empty() => None,
        Some(schema @ Value::Object(_)) => Some(ConstraintSpec::JsonSchema(schema.to_string())),
        Some(_) => {
            return Err(ApiError::bad_request(
                "format is \"json\" or a JSON schema".into(),
                Some("format"),
            ))
        }
    };
    let max_tokens = match o.num_predict {
        None => None,
        Some(n) if n < 0 => None, // -1: no limit, -2: fill the context
        Some(0) => return Err(bad("num_predict must not be 0".into())),
        Some(n) => Some(n as usize),
    };
    Ok(Checked {
        max_tokens,
        sampler,
        stop: o.stop.clone().unwrap_or_default(),
        stream: false,
        include_usage: false,
        constraint: constraint.map(|c| (c, "format")),
        format: ReplyFormat::default(),
        markup: Default::default(),
        logprobs: None,
        n: 1,
    })
}

struct Reply {
    model: String,
    chat: bool,
    started: SystemTime,
    /// The reply split into thinking, text and calls as it arrives.
    splitter: ReplySplitter,
}

impl Reply {
    /// One NDJSON object with generated text (and thinking and calls), not yet done.
    fn part(&self, split: WholeReply) -> Value {
        let mut v = json!({ "model": self.model, "created_at": rfc3339(now()) });
        let calls: Vec<Value> = split.calls.iter().map(ollama_call).collect();
        if self.chat {
            let mut message = json!({ "role": "assistant", "content": split.content });
            if !split.reasoning.is_empty() {
                message["thinking"] = json!(split.reasoning);
            }
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            v["message"] = message;
        } else {
            v["response"] = json!(split.content);
            if !split.reasoning.is_empty() {
                v["thinking"] = json!(split.reasoning);
            }
        }
        v["done"] = json!(false);
        v
    }

    /// The closing object: counts and Ollama's nanosecond durations.
    fn done(&self, c: &Completion, split: WholeReply) -> Value {
        let mut v = self.part(split);
        let ns = |d: Duration| d.as_nanos() as u64;
        let total = self.started.elapsed().unwrap_or_default();
        let map = v.as_object_mut().expect("an object");
        map.insert("done".into(), json!(true));
        let reason = match c.finish {
            crate::batching::FinishReason::Stop => "stop",
            crate::batching::FinishReason::Length => "length",
        };
        map.insert("done_reason".into(), json!(reason));
        map.insert("total_duration".into(), json!(ns(total)));
        map.insert("load_duration".into(), json!(0));
        map.insert("prompt_eval_count".into(), json!(c.prompt_tokens));
        map.insert(
            "prompt_eval_duration".into(),
            json!(ns(c.time_to_first_token)),
        );
        map.insert("eval_count".into(), json!(c.completion_tokens));
        let eval = c.total_time.saturating_sub(c.time_to_first_token);
        map.insert("eval_duration".into(), json!(ns(eval)));
        v
    }

    /// Splits the next text (at the end, the rest) into thinking, answer and calls; a stream
    /// sends thinking that turned out unfinished again, as answer.
    fn split(&mut self, text: &str, finish: bool, streamed: bool) -> WholeReply {
        let mut pieces = self.splitter.push(text);
        if finish {
            pieces.extend(self.splitter.finish());
        }
        let mut split = WholeReply::default();
        for p in pieces {
            match p {
                ReplyPiece::Retract(_) if streamed => {}
                p => split.add(p),
            }
        }
        split
    }
}

/// Ollama's call: `{"function": {"name", "arguments": {...}}}`, arguments as an object.
fn ollama_call(call: &tools::Call) -> Value {
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(json!({}));
    json!({ "function": { "name": call.name, "arguments": arguments } })
}

async fn respond(
    mut reply: Reply,
    mut rx: UnboundedReceiver<Event>,
    stream: bool,
) -> std::result::Result<Response, ApiError> {
    if stream {
        let body = futures_util::stream::unfold(Some((reply, rx)), |state| async move {
            let (mut reply, mut rx) = state?;
            loop {
                let line = match rx.recv().await {
                    Some(Event::Logprobs(_)) => continue,
                    Some(Event::Text(t)) => {
                        let split = reply.split(&t, false, true);
                        if split == WholeReply::default() {
                            continue;
                        }
                        let line = ndjson(&reply.part(split));
                        return Some((Ok::<_, Infallible>(line), Some((reply, rx))));
                    }
                    Some(Event::Done(c)) => {
                        let split = reply.split("", true, true);
                        ndjson(&reply.done(&c, split))
                    }
                    Some(Event::Failed(f)) => {
                        ndjson(&json!({ "error": failure_error(&f).message }))
                    }
                    None => return None,
                };
                return Some((Ok(line), None));
            }
        });
        return Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-ndjson")],
            Body::from_stream(body),
        )
            .into_response());
    }
    let mut text = String::new();
    loop {
        match rx.recv().await {
            Some(Event::Logprobs(_)) => {}
            Some(Event::Text(t)) => text.push_str(&t),
            Some(Event::Done(c)) => {
                let mut split = reply.split(&text, true, false);
                if !split.calls.is_empty() {
                    split.content = split.content.trim().to_string();
                }
                return Ok(Json(reply.done(&c, split)).into_response());
            }
            Some(Event::Failed(f)) => return Err(failure_error(&f)),
            None => return Err(ApiError::server("generation ended without a result".into())),
        }
    }
}

fn ndjson(v: &Value) -> Bytes {
    Bytes::from(format!("{v}\n"))
}

pub fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// `2026-12-04T02:46:54.123456789Z`.
pub fn rfc3339(t: Duration) -> String {
    let secs = crate::chat::format_utc(t.as_secs(), "%Y-%m-%dT%H:%M:%S");
    format!("{secs}.{:09}Z", t.subsec_nanos())
}
