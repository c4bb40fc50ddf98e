//! Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`), which Claude
//! Code and the `anthropic` clients speak. A request is translated into the chat request the
//! OpenAI endpoint runs (system prompt, content blocks, `tool_use` / `tool_result` turns, tools,
//! thinking), and its answer back: content blocks (`thinking`, `text`, `tool_use`), a stop
//! reason and usage, or, streamed, Anthropic's events (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`) made from the OpenAI chunks as they come.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::api::ChatRequest;
use super::error::ApiError;
use super::routes::{body_bytes, generate, prepare_chat, App};
use super::state::AppState;
use super::stream::Flavor;
use super::translate::{chat_fields, function_tool, whole_reply, ChunkReader};

pub async fn messages(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    answer(&app, &headers, body)
        .await
        .unwrap_or_else(anthropic_error)
}

pub async fn count_tokens(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let counted = async {
        authorize(&app, &headers)?;
        let request = chat_request(&parse(body)?)?;
        let chat = prepare_chat(&app, request).await?;
        Ok::<_, ApiError>(Json(json!({ "input_tokens": chat.prompt.len() })).into_response())
    };
    counted.await.unwrap_or_else(anthropic_error)
}

async fn answer(
    app: &Arc<AppState>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    authorize(app, headers)?;
    let request = parse(body)?;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let chat = prepare_chat(app, chat_request(&request)?).await?;
    let input_tokens = chat.prompt.len();
    let model = chat.model.clone();
    let id = format!("msg_{:016x}", app.random_seed());
    let response = generate(
        app,
        &chat.engine,
        chat.prompt,
        chat.checked,
        Flavor::Chat,
        chat.model,
        None,
    )
    .await?;
    let message = Message {
        id,
        model,
        input_tokens,
    };
    if stream {
        return Ok(events(message, response));
    }
    let reply = whole_reply(response).await?;
    Ok(Json(message.whole(&reply)).into_response())
}

/// The key as Anthropic's clients send it (`x-api-key`), or as OpenAI's (`Authorization`).
fn authorize(app: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let mut headers = headers.clone();
    if let Some(key) = headers.get("x-api-key").and_then(|k| k.to_str().ok()) {
        if let Ok(bearer) = HeaderValue::from_str(&format!("Bearer {key}")) {
            headers.insert(header::AUTHORIZATION, bearer);
        }
    }
    app.authorize(&headers)
}

fn parse(body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let bytes = body_bytes(body)?;
    let value: Value = super::api::parse(&bytes)?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body must be an object".into(),
            None,
        ));
    }
    Ok(value)
}

/// The OpenAI chat request saying what `request` says.
fn chat_request(request: &Value) -> Result<ChatRequest, ApiError> {
    let bad = |what: String, param: &str| ApiError::bad_request(what, Some(param));
    let mut messages = Vec::new();
    match request.get("system") {
        None | Some(Value::Null) => {}
        Some(system) => messages.push(json!({"role": "system", "content": text_of(system)?})),
    }
    let turns = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("messages must be a list".into(), "messages"))?;
    for turn in turns {
        match turn.get("role").and_then(Value::as_str) {
            Some("user") => messages.extend(user_turn(turn.get("content"))?),
            Some("assistant") => messages.push(assistant_turn(turn.get("content"))?),
            other => {
                return Err(bad(
                    format!("a message's role is user or assistant, not {other:?}"),
                    "messages",
                ))
            }
        }
    }
    let mut chat = chat_fields(
        request,
        &[
            ("model", "model"),
            ("max_tokens", "max_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("top_k", "top_k"),
            ("stop_sequences", "stop"),
            ("stream", "stream"),
        ],
    );
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        let tools = tools.iter().map(|t| function_tool(t, "input_schema"));
        chat.insert("tools".into(), tools.collect());
    }
    if let Some(choice) = request.get("tool_choice") {
        let openai = match choice.get("type").and_then(Value::as_str) {
            Some("auto") => json!("auto"),
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => json!({"type": "function", "function": {"name": choice.get("name")}}),
            other => return Err(bad(format!("tool_choice type {other:?}"), "tool_choice")),
        };
        chat.insert("tool_choice".into(), openai);
    }
    match request.pointer("/thinking/type").and_then(Value::as_str) {
        Some("enabled") => {
            chat.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": true}),
            );
            if let Some(budget) = request.pointer("/thinking/budget_tokens") {
                chat.insert("reasoning_budget_tokens".into(), budget.clone());
            }
        }
        Some("disabled") => {
            chat.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": false}),
            );
        }
        _ => {}
    }
    serde_json::from_value(Value::Object(chat)).map_err(|e| bad(e.to_string(), "messages"))
}

/// A system prompt or tool result: a string, or text blocks joined.
fn text_of(content: &Value) -> Result<String, ApiError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let texts: Result<Vec<&str>, ApiError> = blocks
                .iter()
                .map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => Ok(b.get("text").and_then(Value::as_str).unwrap_or("")),
                    other => Err(unsupported_block(other)),
                })
                .collect();
            Ok(texts?.join("\n"))
        }
        Value::Null => Ok(String::new()),
        _ => Err(ApiError::bad_request(
            "content is a string or a list of blocks".into(),
            Some("messages"),
        )),
    }
}

fn unsupported_block(kind: Option<&str>) -> ApiError {
    ApiError::bad_request(
        format!("content blocks of type {kind:?} are not supported here"),
        Some("messages"),
    )
}

/// A user turn: its tool results (each a `tool` message, answering the previous turn's
/// calls), then its text.
fn user_turn(content: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let Some(Value::Array(blocks)) = content else {
        return Ok(vec![
            json!({"role": "user", "content": text_of(content.unwrap_or(&Value::Null))?}),
        ]);
    };
    let mut out = Vec::new();
    let mut texts = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => texts.push(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_result") => out.push(json!({
                "role": "tool",
                "tool_call_id": block.get("tool_use_id").cloned().unwrap_or(Value::Null),
                "content": text_of(block.get("content").unwrap_or(&Value::Null))?,
            })),
            other => return Err(unsupported_block(other)),
        }
    }
    if !texts.is_empty() {
        out.push(json!({"role": "user", "content": texts.join("\n")}));
    }
    Ok(out)
}

/// An assistant turn: its text, its thinking, and its tool calls.
fn assistant_turn(content: Option<&Value>) -> Result<Value, ApiError> {
    let Some(Value::Array(blocks)) = content else {
        return Ok(
            json!({"role": "assistant", "content": text_of(content.unwrap_or(&Value::Null))?}),
        );
    };
    let (mut text, mut thinking, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("thinking") => {
                thinking.push(block.get("thinking").and_then(Value::as_str).unwrap_or(""))
            }
            Some("redacted_thinking") => {}
            Some("tool_use") => calls.push(json!({
                "id": block.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": block.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": block.get("input").unwrap_or(&json!({})).to_string(),
                },
            })),
            other => return Err(unsupported_block(other)),
        }
    }
    let mut turn = json!({"role": "assistant", "content": text.join("\n")});
    if !thinking.is_empty() {
        turn["reasoning_content"] = json!(thinking.join("\n"));
    }
    if !calls.is_empty() {
        turn["tool_calls"] = Value::Array(calls);
    }
    Ok(turn)
}

/// What every answer to one request shares.
struct Message {
    id: String,
    model: String,
    input_tokens: usize,
}

impl Message {
    /// The whole answer from the OpenAI reply.
    fn whole(&self, reply: &Value) -> Value {
        let choice = &reply["choices"][0];
        let message = &choice["message"];
        let mut content = Vec::new();
        if let Some(thinking) = message["reasoning_content"]
            .as_str()
            .filter(|t| !t.is_empty())
        {
            content.push(json!({"type": "thinking", "thinking": thinking, "signature": ""}));
        }
        if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
            content.push(json!({"type": "text", "text": text}));
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            content.push(tool_use(call));
        }
        let usage = &reply["usage"];
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason(choice["finish_reason"].as_str()),
            "stop_sequence": null,
            "usage": {
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "cache_read_input_tokens": usage.pointer("/prompt_tokens_details/cached_tokens"),
            },
        })
    }
}

fn tool_use(call: &Value) -> Value {
    let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
    json!({
        "type": "tool_use",
        "id": call["id"],
        "name": call["function"]["name"],
        "input": serde_json::from_str::<Value>(arguments).unwrap_or(json!({})),
    })
}

fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("tool_calls") => "tool_use",
        _ => "end_turn",
    }
}

/// The streamed answer: the OpenAI stream's chunks read as they come, Anthropic's events sent.
fn events(message: Message, openai: Response) -> Response {
    let start = json!({"type": "message_start", "message": {
        "id": message.id, "type": "message", "role": "assistant", "model": message.model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": message.input_tokens, "output_tokens": 0},
    }});
    let opening = [event(&start), event(&json!({"type": "ping"}))];
    let mut translator = Translator::default();
    let chunks = openai.into_body().into_data_stream().map(move |chunk| {
        let bytes = chunk.unwrap_or_default();
        Ok::<_, Infallible>(Bytes::from(
            translator.feed(&String::from_utf8_lossy(&bytes)),
        ))
    });
    let body = futures_util::stream::iter(opening.map(|e| Ok(Bytes::from(e)))).chain(chunks);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

fn event(value: &Value) -> String {
    let kind = value["type"].as_str().unwrap_or("message");
    format!("event: {kind}\ndata: {value}\n\n")
}

/// The content block being streamed.
#[derive(Clone, Copy, PartialEq)]
enum Block {
    Thinking,
    Text,
    ToolUse,
}

/// Turns OpenAI chunks (`data: {...}` events, split anywhere) into Anthropic's events.
#[derive(Default)]
struct Translator {
    reader: ChunkReader,
    open: Option<Block>,
    /// The index of the open block (or of the next one).
    index: usize,
    stop_reason: Option<&'static str>,
    finished: bool,
}

impl Translator {
    fn feed(&mut self, text: &str) -> String {
        let chunks = self.reader.feed(text);
        let mut out = String::new();
        for chunk in chunks {
            if !self.finished {
                out += &self.chunk(&chunk);
            }
        }
        out
    }

    fn chunk(&mut self, chunk: &Value) -> String {
        let mut out = String::new();
        if let Some(message) = chunk.pointer("/error/message") {
            self.finished = true;
            let error =
                json!({"type": "error", "error": {"type": "api_error", "message": message}});
            return event(&error);
        }
        if let Some(choice) = chunk["choices"].get(0) {
            let delta = &choice["delta"];
            if let Some(t) = delta["reasoning_content"]
                .as_str()
                .filter(|t| !t.is_empty())
            {
                out +=
                    &self.open_block(Block::Thinking, json!({"type": "thinking", "thinking": ""}));
                out += &self.delta(json!({"type": "thinking_delta", "thinking": t}));
            }
            if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                out += &self.open_block(Block::Text, json!({"type": "text", "text": ""}));
                out += &self.delta(json!({"type": "text_delta", "text": t}));
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                if call.get("id").is_some_and(|id| !id.is_null()) {
                    // Each call is a block of its own.
                    out += &self.close_block();
                    let start = json!({"type": "tool_use", "id": call["id"],
                                       "name": call["function"]["name"], "input": {}});
                    out += &self.open_block(Block::ToolUse, start);
                }
                if let Some(args) = call["function"]["arguments"]
                    .as_str()
                    .filter(|a| !a.is_empty())
                {
                    out += &self.delta(json!({"type": "input_json_delta", "partial_json": args}));
                }
            }
            if let Some(finish) = choice["finish_reason"].as_str() {
                self.stop_reason = Some(stop_reason(Some(finish)));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.finished = true;
            out += &self.close_block();
            out += &event(&json!({"type": "message_delta",
                "delta": {"stop_reason": self.stop_reason.unwrap_or("end_turn"), "stop_sequence": null},
                "usage": {"output_tokens": usage["completion_tokens"]}}));
            out += &event(&json!({"type": "message_stop"}));
        }
        out
    }

    /// Opens a block of `kind` unless one is open (closing another kind first).
    fn open_block(&mut self, kind: Block, start: Value) -> String {
        if self.open == Some(kind) && kind != Block::ToolUse {
            return String::new();
        }
        let mut out = self.close_block();
        self.open = Some(kind);
        out += &event(&json!({"type": "content_block_start", "index": self.index,
                              "content_block": start}));
        out
    }

    fn delta(&self, delta: Value) -> String {
        event(&json!({"type": "content_block_delta", "index": self.index, "delta": delta}))
    }

    fn close_block(&mut self) -> String {
        if self.open.take().is_none() {
            return String::new();
        }
        let stop = event(&json!({"type": "content_block_stop", "index": self.index}));
        self.index += 1;
        stop
    }
}

/// An error as Anthropic sends one: `{"type": "error", "error": {"type", "message"}}`.
fn anthropic_error(e: ApiError) -> Response {
    let kind = match e.status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::NOT_FOUND => "not_found_error",
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => "overloaded_error",
        s if s.is_client_error() => "invalid_request_error",
        _ => "api_error",
    };
    let body = json!({"type": "error", "error": {"type": kind, "message": e.message}});
    (e.status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OpenAI stream: thinking, text, a tool call in two pieces, the finish, the usage.
    fn openai_stream() -> String {
        let chunks = [
            json!({"choices": [{"delta": {"reasoning_content": "Hmm."}, "finish_reason": null}]}),
            json!({"choices": [{"delta": {"content": "Let me look."}, "finish_reason": null}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1",
                "function": {"name": "get_weather", "arguments": "{\"city\": "}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0,
                "function": {"arguments": "\"Paris\"}"}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7}}),
        ];
        let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        text.push_str("data: [DONE]\n\n");
        text
    }

    fn kinds(events: &str) -> Vec<String> {
        events
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| {
                let v: Value = serde_json::from_str(d).unwrap();
                let block = v
                    .pointer("/content_block/type")
                    .or(v.pointer("/delta/type"));
                match block.and_then(Value::as_str) {
                    Some(b) => format!("{}:{b}", v["type"].as_str().unwrap()),
                    None => v["type"].as_str().unwrap().to_string(),
                }
            })
            .collect()
    }

    #[test]
    fn a_stream_becomes_anthropics_events_wherever_it_is_cut() {
        let stream = openai_stream();
        let whole = Translator::default().feed(&stream);
        assert_eq!(
            kinds(&whole),
            [
                "content_block_start:thinking",
                "content_block_delta:thinking_delta",
                "content_block_stop",
                "content_block_start:text",
                "content_block_delta:text_delta",
                "content_block_stop",
                "content_block_start:tool_use",
                "content_block_delta:input_json_delta",
                "content_block_delta:input_json_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert!(whole.contains("\"stop_reason\":\"tool_use\""), "{whole}");
        assert!(whole.contains("\"output_tokens\":7"), "{whole}");
        for cut in 1..stream.len() {
            let mut t = Translator::default();
            let (a, b) = stream.split_at(cut);
            assert_eq!(t.feed(a) + &t.feed(b), whole, "cut at {cut}");
        }
    }

    #[test]
    fn requests_become_chat_requests_and_bad_ones_are_refused() {
        let good = json!({
            "model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "t1", "name": "w", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "Rain"},
                    {"type": "text", "text": "So?"}]},
            ],
            "tools": [{"name": "w", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"},
        });
        let chat = chat_request(&good).unwrap();
        assert_eq!(
            chat.messages.len(),
            5,
            "system, user, assistant, tool, user"
        );
        for bad in [
            json!({"messages": "x"}),
            json!({"messages": [{"role": "robot", "content": "x"}]}),
            json!({"messages": [{"role": "user", "content": [{"type": "image"}]}]}),
            json!({"messages": [], "tool_choice": {"type": "sometimes"}}),
        ] {
            assert!(chat_request(&bad).is_err(), "{bad}");
        }
    }
}
