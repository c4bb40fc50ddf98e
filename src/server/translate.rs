//! What the adapters over the chat endpoint share (Anthropic's Messages in
//! [`super::anthropic`], OpenAI's Responses in [`super::responses`]): copying a request's
//! settings into a chat request, a function tool in chat form, the chat reply read whole, and
//! the chat stream's chunks read back from its server-sent events.

use axum::response::Response;
use serde_json::{json, Map, Value};

use super::error::ApiError;

/// A chat request's fields from `request`, renamed as `fields` says (`(from, to)`), nulls
/// left out; a streamed one asks for the usage chunk at its end, which the adapters finish on.
pub fn chat_fields(request: &Value, fields: &[(&str, &str)]) -> Map<String, Value> {
    let mut chat = Map::new();
    for (from, to) in fields {
        if let Some(v) = request.get(*from).filter(|v| !v.is_null()) {
            chat.insert((*to).into(), v.clone());
        }
    }
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        chat.insert("stream_options".into(), json!({"include_usage": true}));
    }
    chat
}

/// A chat tool from a flat one (`name`, `description` and its schema under `schema_key`).
pub fn function_tool(tool: &Value, schema_key: &str) -> Value {
    json!({"type": "function", "function": {
        "name": tool.get("name").cloned().unwrap_or(Value::Null),
        "description": tool.get("description").cloned().unwrap_or(json!("")),
        "parameters": tool.get(schema_key).cloned().unwrap_or(json!({"type": "object"})),
    }})
}

/// The chat endpoint's whole (not streamed) reply as JSON.
pub async fn whole_reply(response: Response) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| ApiError::server(format!("reading the reply failed: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::server(format!("the reply is not JSON: {e}")))
}

/// The chat stream's chunks, from its events split anywhere (`data: {...}` then a blank
/// line; the closing `[DONE]` is no chunk).
#[derive(Default)]
pub struct ChunkReader {
    pending: String,
}

impl ChunkReader {
    /// The chunks `text` completes.
    pub fn feed(&mut self, text: &str) -> Vec<Value> {
        self.pending.push_str(text);
        let mut chunks = Vec::new();
        while let Some(end) = self.pending.find("\n\n") {
            let raw: String = self.pending.drain(..end + 2).collect();
            let data = raw.trim().strip_prefix("data: ").filter(|d| *d != "[DONE]");
            chunks.extend(data.and_then(|d| serde_json::from_str(d).ok()));
        }
        chunks
    }
}
