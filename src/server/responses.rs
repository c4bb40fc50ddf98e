//! OpenAI's Responses API (`POST /v1/responses`), which coding agents call. A request's input
//! items (messages, `function_call`s and their `function_call_output`s), `instructions`, tools
//! and settings become the chat request the chat endpoint runs; its answer becomes output
//! items (`reasoning`, `message`, `function_call`), whole or as the API's streaming events.
//! Each response's conversation is kept in memory (the last [`KEPT`]), so a request that
//! names it as `previous_response_id` goes on from it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::api::ChatRequest;
use super::error::ApiError;
use super::routes::{body_bytes, generate, prepare_chat, App};
use super::state::{unix_now, AppState};
use super::stream::Flavor;
use super::translate::{chat_fields, function_tool, whole_reply, ChunkReader};

/// Conversations kept for `previous_response_id`.
const KEPT: usize = 256;

/// The conversations of recent responses, by response id: chat messages, the answer's last.
#[derive(Default)]
pub struct Conversations(Mutex<VecDeque<(String, Vec<Value>)>>);

impl Conversations {
    fn get(&self, id: &str) -> Option<Vec<Value>> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter().find(|(k, _)| k == id).map(|(_, m)| m.clone())
    }

    fn keep(&self, id: String, messages: Vec<Value>) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back((id, messages));
    }
}

pub async fn create(
    State(app): App,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let request: Value = super::api::parse(&body_bytes(body)?)?;
    if !request.is_object() {
        return Err(ApiError::bad_request(
            "the body must be an object".into(),
            None,
        ));
    }
    let messages = conversation(&app, &request)?;
    let chat = prepare_chat(&app, chat_request(&request, &messages)?).await?;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let answer = Answer {
        id: format!("resp_{:016x}", app.random_seed()),
        model: chat.model.clone(),
        created_at: unix_now(),
        request: request.clone(),
        messages,
        store: request.get("store").and_then(Value::as_bool) != Some(false),
    };
    let response = generate(
        &app,
        &chat.engine,
        chat.prompt,
        chat.checked,
        Flavor::Chat,
        chat.model,
        None,
    )
    .await?;
    if stream {
        return Ok(events(app, answer, response));
    }
    let reply = whole_reply(response).await?;
    let choice = &reply["choices"][0];
    let mut output = Output::default();
    output.add_message(&choice["message"]);
    let finished = output.finish(&answer, choice["finish_reason"].as_str(), &reply["usage"]);
    answer.remember(&app, &output);
    Ok(Json(finished).into_response())
}

/// The chat messages before this request's: the previous response's conversation, then this
/// request's input items.
fn conversation(app: &AppState, request: &Value) -> Result<Vec<Value>, ApiError> {
    let bad = |what: String| ApiError::bad_request(what, Some("input"));
    let mut messages = match request.get("previous_response_id").and_then(Value::as_str) {
        None => Vec::new(),
        Some(id) => app.responses.get(id).ok_or_else(|| {
            ApiError::not_found(format!("no response {id:?} is kept here"))
                .with_code("previous_response_not_found")
        })?,
    };
    match request.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for item in items {
                add_item(&mut messages, item).map_err(bad)?;
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err(bad("input is a string or a list of items".into())),
    }
    Ok(messages)
}

/// One input item as chat messages.
fn add_item(messages: &mut Vec<Value>, item: &Value) -> Result<(), String> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    match kind {
        "message" => {
            let role = match item.get("role").and_then(Value::as_str) {
                Some("developer") | Some("system") => "system",
                Some(r @ ("user" | "assistant")) => r,
                other => return Err(format!("a message's role {other:?}")),
            };
            messages.push(json!({"role": role, "content": text_of(item.get("content"))?}));
        }
        "function_call" => {
            let call = json!({
                "id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": item.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": item.get("arguments").cloned().unwrap_or(json!("{}")),
                },
            });
            // Calls made together are one assistant turn.
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" && last["tool_calls"].is_array() => {
                    last["tool_calls"]
                        .as_array_mut()
                        .expect("checked")
                        .push(call);
                }
                _ => {
                    messages.push(json!({"role": "assistant", "content": "", "tool_calls": [call]}))
                }
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                other => text_of(other)?,
            };
            messages.push(json!({"role": "tool",
                "tool_call_id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "content": output}));
        }
        // The model's own thinking from an earlier turn: not sent back to the template.
        "reasoning" => {}
        other => {
            return Err(format!(
                "input items of type {other:?} are not supported here"
            ))
        }
    }
    Ok(())
}

/// A content: a string, or text parts joined.
fn text_of(content: Option<&Value>) -> Result<String, String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => {
                        texts.push(part.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    other => {
                        return Err(format!(
                            "content parts of type {other:?} are not supported here"
                        ))
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err("content is a string or a list of parts".into()),
    }
}

/// The chat request for `messages`, with the request's instructions, tools and settings.
fn chat_request(request: &Value, messages: &[Value]) -> Result<ChatRequest, ApiError> {
    let mut all = Vec::with_capacity(messages.len() + 1);
    if let Some(instructions) = request.get("instructions").and_then(Value::as_str) {
        all.push(json!({"role": "system", "content": instructions}));
    }
    all.extend_from_slice(messages);
    let mut chat = chat_fields(
        request,
        &[
            ("model", "model"),
            ("max_output_tokens", "max_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("top_k", "top_k"),
            ("seed", "seed"),
            ("stream", "stream"),
        ],
    );
    chat.insert("messages".into(), Value::Array(all));
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        let functions: Vec<Value> = tools
            .iter()
            .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
            .map(|t| function_tool(t, "parameters"))
            .collect();
        if functions.len() != tools.len() {
            return Err(ApiError::bad_request(
                "only tools of type \"function\" run here".into(),
                Some("tools"),
            ));
        }
        chat.insert("tools".into(), Value::Array(functions));
    }
    if let Some(choice) = request.get("tool_choice") {
        let chat_choice = match choice {
            Value::String(_) => choice.clone(),
            _ => json!({"type": "function", "function": {"name": choice.get("name")}}),
        };
        chat.insert("tool_choice".into(), chat_choice);
    }
    if let Some(format) = request.pointer("/text/format") {
        let response_format = match format.get("type").and_then(Value::as_str) {
            Some("json_schema") => json!({"type": "json_schema", "json_schema": {
                "name": format.get("name").cloned().unwrap_or(json!("output")),
                "schema": format.get("schema").cloned().unwrap_or(json!({})),
                "strict": format.get("strict").cloned().unwrap_or(json!(true)),
            }}),
            _ => format.clone(),
        };
        chat.insert("response_format".into(), response_format);
    }
    if let Some(effort) = request.pointer("/reasoning/effort") {
        chat.insert("reasoning_effort".into(), effort.clone());
    }
    serde_json::from_value(Value::Object(chat))
        .map_err(|e| ApiError::bad_request(e.to_string(), Some("input")))
}

/// What one response keeps while it is made.
struct Answer {
    id: String,
    model: String,
    created_at: u64,
    request: Value,
    /// The conversation before this answer (chat messages).
    messages: Vec<Value>,
    store: bool,
}

impl Answer {
    /// The response object around `output`, as `status` says.
    fn response(&self, output: Vec<Value>, status: &str, usage: Value, incomplete: Value) -> Value {
        let setting = |k: &str| self.request.get(k).cloned().unwrap_or(Value::Null);
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage,
            "incomplete_details": incomplete,
            "error": null,
            "instructions": setting("instructions"),
            "previous_response_id": setting("previous_response_id"),
            "max_output_tokens": setting("max_output_tokens"),
            "temperature": setting("temperature"),
            "top_p": setting("top_p"),
            "tools": self.request.get("tools").cloned().unwrap_or(json!([])),
            "tool_choice": self.request.get("tool_choice").cloned().unwrap_or(json!("auto")),
            "parallel_tool_calls": true,
            "metadata": {},
        })
    }

    /// Keeps the conversation with this answer for a later `previous_response_id`.
    fn remember(&self, app: &AppState, output: &Output) {
        if !self.store {
            return;
        }
        let mut messages = self.messages.clone();
        let mut turn = json!({"role": "assistant", "content": output.text});
        if !output.calls.is_empty() {
            turn["tool_calls"] = Value::Array(output.calls.clone());
        }
        messages.push(turn);
        app.responses.keep(self.id.clone(), messages);
    }
}

/// The answer's parts as they accumulate.
#[derive(Default)]
struct Output {
    reasoning: String,
    text: String,
    /// Chat-format tool calls (`id`, `function.name`, `function.arguments`).
    calls: Vec<Value>,
}

impl Output {
    fn add_message(&mut self, message: &Value) {
        self.reasoning += message["reasoning_content"].as_str().unwrap_or("");
        self.text += message["content"].as_str().unwrap_or("");
        self.calls.extend(
            message["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .cloned(),
        );
    }

    /// The output items, in the order they were written.
    fn items(&self, id: &str) -> Vec<Value> {
        let mut items = Vec::new();
        if !self.reasoning.is_empty() {
            items.push(reasoning_item(id, &self.reasoning, "completed"));
        }
        if !self.text.is_empty() {
            items.push(message_item(id, &self.text, "completed"));
        }
        for (i, call) in self.calls.iter().enumerate() {
            let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
            items.push(call_item(id, i, call, arguments, "completed"));
        }
        items
    }

    /// The whole response, finished as the chat reply's `finish` and `usage` say.
    fn finish(&self, answer: &Answer, finish: Option<&str>, usage: &Value) -> Value {
        let (status, incomplete) = match finish {
            Some("length") => ("incomplete", json!({"reason": "max_output_tokens"})),
            _ => ("completed", Value::Null),
        };
        let usage = json!({
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": usage.pointer("/prompt_tokens_details/cached_tokens").cloned().unwrap_or(json!(0)), "cache_write_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        });
        answer.response(self.items(&answer.id), status, usage, incomplete)
    }
}

fn reasoning_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "reasoning", "id": format!("rs_{}", &id[5..]), "status": status,
           "summary": [], "content": [{"type": "reasoning_text", "text": text}]})
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": format!("msg_{}", &id[5..]), "status": status,
           "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
}

fn call_item(id: &str, i: usize, call: &Value, arguments: &str, status: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{}_{i}", &id[5..]), "status": status,
           "call_id": call["id"], "name": call["function"]["name"], "arguments": arguments})
}

/// The streamed response: the chat stream's chunks read as they come, the Responses API's
/// events sent, the last one the whole response.
fn events(app: Arc<AppState>, answer: Answer, chat: Response) -> Response {
    let mut t = Translator {
        answer,
        app,
        output: Output::default(),
        open: None,
        index: 0,
        sequence: 0,
        reader: ChunkReader::default(),
        finish: None,
        done: false,
    };
    let start = t.response_event("response.created", "in_progress")
        + &t.response_event("response.in_progress", "in_progress");
    let chunks = chat.into_body().into_data_stream().map(move |chunk| {
        let bytes = chunk.unwrap_or_default();
        Ok::<_, Infallible>(Bytes::from(t.feed(&String::from_utf8_lossy(&bytes))))
    });
    let body = futures_util::stream::once(async move { Ok(Bytes::from(start)) }).chain(chunks);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

/// The output item being streamed.
#[derive(Clone, Copy, PartialEq)]
enum Item {
    Reasoning,
    Message,
    /// The call's index among the answer's calls.
    Call(usize),
}

struct Translator {
    answer: Answer,
    app: Arc<AppState>,
    output: Output,
    open: Option<Item>,
    /// The open item's output index (or the next one's).
    index: usize,
    sequence: u64,
    reader: ChunkReader,
    finish: Option<String>,
    done: bool,
}

impl Translator {
    fn event(&mut self, kind: &str, mut data: Value) -> String {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        format!("event: {kind}\ndata: {data}\n\n")
    }

    fn response_event(&mut self, kind: &str, status: &str) -> String {
        let response = self
            .answer
            .response(Vec::new(), status, Value::Null, Value::Null);
        self.event(kind, json!({ "response": response }))
    }

    fn feed(&mut self, text: &str) -> String {
        let chunks = self.reader.feed(text);
        let mut out = String::new();
        for chunk in chunks {
            if !self.done {
                out += &self.chunk(&chunk);
            }
        }
        out
    }

    fn chunk(&mut self, chunk: &Value) -> String {
        let mut out = String::new();
        if let Some(message) = chunk.pointer("/error/message") {
            self.done = true;
            let error = json!({"code": "server_error", "message": message});
            return self.event("error", error);
        }
        if let Some(choice) = chunk["choices"].get(0) {
            let delta = &choice["delta"];
            if let Some(t) = delta["reasoning_content"]
                .as_str()
                .filter(|t| !t.is_empty())
            {
                out += &self.open_item(Item::Reasoning);
                self.output.reasoning += t;
                let item_id = self.item_id(Item::Reasoning);
                out += &self.event(
                    "response.reasoning_text.delta",
                    json!({"item_id": item_id,
                    "output_index": self.index, "content_index": 0, "delta": t}),
                );
            }
            if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                out += &self.open_item(Item::Message);
                self.output.text += t;
                let item_id = self.item_id(Item::Message);
                out += &self.event(
                    "response.output_text.delta",
                    json!({"item_id": item_id,
                    "output_index": self.index, "content_index": 0, "delta": t, "logprobs": []}),
                );
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                if call.get("id").is_some_and(|id| !id.is_null()) {
                    let mut started = call.clone();
                    started["function"]["arguments"] = json!("");
                    self.output.calls.push(started);
                    out += &self.open_item(Item::Call(self.output.calls.len() - 1));
                }
                let args = call["function"]["arguments"].as_str().unwrap_or("");
                if let (false, Some(Item::Call(i))) = (args.is_empty(), self.open) {
                    let so_far = self.output.calls[i]["function"]["arguments"]
                        .as_str()
                        .unwrap_or("");
                    self.output.calls[i]["function"]["arguments"] =
                        json!(format!("{so_far}{args}"));
                    let item_id = self.item_id(Item::Call(i));
                    out += &self.event(
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": self.index, "delta": args}),
                    );
                }
            }
            if let Some(finish) = choice["finish_reason"].as_str() {
                self.finish = Some(finish.to_string());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.done = true;
            out += &self.close_item();
            let whole = self
                .output
                .finish(&self.answer, self.finish.as_deref(), usage);
            self.answer.remember(&self.app, &self.output);
            let kind = match whole["status"].as_str() {
                Some("incomplete") => "response.incomplete",
                _ => "response.completed",
            };
            out += &self.event(kind, json!({ "response": whole }));
        }
        out
    }

    fn item_id(&self, item: Item) -> String {
        let id = &self.answer.id[5..];
        match item {
            Item::Reasoning => format!("rs_{id}"),
            Item::Message => format!("msg_{id}"),
            Item::Call(i) => format!("fc_{id}_{i}"),
        }
    }

    /// The item as it stands, `status` given.
    fn item_json(&self, item: Item, status: &str) -> Value {
        let id = &self.answer.id;
        match item {
            Item::Reasoning => reasoning_item(id, &self.output.reasoning, status),
            Item::Message => message_item(id, &self.output.text, status),
            Item::Call(i) => {
                let call = &self.output.calls[i];
                let arguments = call["function"]["arguments"].as_str().unwrap_or("");
                call_item(id, i, call, arguments, status)
            }
        }
    }

    /// Opens `item` unless it is open, closing the open one first.
    fn open_item(&mut self, item: Item) -> String {
        if self.open == Some(item) {
            return String::new();
        }
        let mut out = self.close_item();
        self.open = Some(item);
        let mut added = self.item_json(item, "in_progress");
        if item == Item::Message {
            added["content"] = json!([]);
        }
        out += &self.event(
            "response.output_item.added",
            json!({"output_index": self.index, "item": added}),
        );
        if item == Item::Message {
            let part =
                json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            out += &self.event(
                "response.content_part.added",
                json!({"item_id": self.item_id(item),
                "output_index": self.index, "content_index": 0, "part": part}),
            );
        }
        out
    }

    fn close_item(&mut self) -> String {
        let Some(item) = self.open.take() else {
            return String::new();
        };
        let (index, item_id) = (self.index, self.item_id(item));
        let done = self.item_json(item, "completed");
        let mut out = String::new();
        match item {
            Item::Reasoning => {
                let text = self.output.reasoning.clone();
                out += &self.event(
                    "response.reasoning_text.done",
                    json!({"item_id": item_id,
                    "output_index": index, "content_index": 0, "text": text}),
                );
            }
            Item::Message => {
                let text = self.output.text.clone();
                out += &self.event(
                    "response.output_text.done",
                    json!({"item_id": item_id,
                    "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                );
                out += &self.event(
                    "response.content_part.done",
                    json!({"item_id": item_id,
                    "output_index": index, "content_index": 0, "part": done["content"][0]}),
                );
            }
            Item::Call(_) => {
                out += &self.event(
                    "response.function_call_arguments.done",
                    json!({
                    "item_id": item_id, "output_index": index, "name": done["name"],
                    "arguments": done["arguments"]}),
                );
            }
        }
        out += &self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
        self.index += 1;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn translator() -> Translator {
        let no_models: super::super::Loader = Arc::new(|_| Err("no models".into()));
        let store = crate::store::Store::from_env();
        let pool = super::super::ModelPool::on_demand(store, no_models, 1, None);
        let app = Arc::new(AppState::new(pool, None, Duration::from_secs(1), None));
        let answer = Answer {
            id: "resp_0123456789abcdef".into(),
            model: "m".into(),
            created_at: 0,
            request: json!({}),
            messages: vec![json!({"role": "user", "content": "Weather?"})],
            store: true,
        };
        Translator {
            answer,
            app,
            output: Output::default(),
            open: None,
            index: 0,
            sequence: 0,
            reader: ChunkReader::default(),
            finish: None,
            done: false,
        }
    }

    fn chat_stream() -> String {
        let chunks = [
            json!({"choices": [{"delta": {"reasoning_content": "Hmm."}}]}),
            json!({"choices": [{"delta": {"content": "Let me look."}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1",
                "function": {"name": "get_weather", "arguments": "{\"city\": "}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0,
                "function": {"arguments": "\"Oslo\"}"}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7,
                "total_tokens": 16}}),
        ];
        let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        text.push_str("data: [DONE]\n\n");
        text
    }

    #[test]
    fn a_chat_stream_becomes_response_events_wherever_it_is_cut() {
        let stream = chat_stream();
        let mut t = translator();
        let whole = t.feed(&stream);
        let kinds: Vec<&str> = whole
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "response.output_item.added",
                "response.reasoning_text.delta",
                "response.reasoning_text.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        assert!(
            whole.contains(r#""arguments":"{\"city\": \"Oslo\"}""#),
            "{whole}"
        );
        // The conversation is kept with the answer's calls, for previous_response_id.
        let kept = t.app.responses.get("resp_0123456789abcdef").unwrap();
        assert_eq!(kept[1]["tool_calls"][0]["function"]["name"], "get_weather");
        for cut in (1..stream.len()).step_by(7) {
            let mut t = translator();
            let (a, b) = stream.split_at(cut);
            assert_eq!(t.feed(a) + &t.feed(b), whole, "cut at {cut}");
        }
    }

    #[test]
    fn input_items_become_chat_messages() {
        let mut messages = Vec::new();
        for item in [
            json!({"role": "developer", "content": "Be brief."}),
            json!({"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]}),
            json!({"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"}),
            json!({"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "Rain"}),
            json!({"type": "reasoning", "summary": []}),
        ] {
            add_item(&mut messages, &item).unwrap();
        }
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(messages[2]["tool_calls"].as_array().unwrap().len(), 2);
        for bad in [
            json!({"role": "robot", "content": "x"}),
            json!({"type": "web_search_call"}),
            json!({"role": "user", "content": [{"type": "input_image"}]}),
        ] {
            assert!(add_item(&mut Vec::new(), &bad).is_err(), "{bad}");
        }
    }
}
