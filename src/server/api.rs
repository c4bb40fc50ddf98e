//! The OpenAI request bodies this server accepts and the checks on their fields. Fields it does
//! not know are ignored (as OpenAI-compatible servers do); features it lacks are refused with a
//! 400 rather than silently dropped.

use crate::batching::{ReplyMarkup, MAX_TOP_LOGPROBS};
use crate::grammar::ConstraintSpec;
use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use super::reply::ReplyFormat;

#[derive(Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
}

/// A message's content: a string, or parts of which only text parts are supported.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    /// An assistant turn's calls: `[{"id", "type": "function", "function": {"name",
    /// "arguments": JSON text}}]`.
    pub tool_calls: Option<Value>,
    /// A `tool` turn: the call it answers, and the tool's name.
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
    /// An assistant turn's thinking, as this server returned it.
    pub reasoning_content: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// The sampling and length fields both endpoints share.
#[derive(Deserialize, Default)]
pub struct Sampling {
    pub max_tokens: Option<u64>,
    /// The chat endpoint's newer name for `max_tokens`.
    pub max_completion_tokens: Option<u64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    /// Extensions (llama.cpp's server has them too).
    pub top_k: Option<usize>,
    pub min_p: Option<f32>,
    pub seed: Option<u64>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub stop: Option<OneOrMany>,
    pub n: Option<u64>,
    /// Chat: `true` with `top_logprobs` alternatives; completions: the number of alternatives.
    pub logprobs: Option<serde_json::Value>,
    pub top_logprobs: Option<u64>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    /// OpenAI's structured output: `{"type": "text" | "json_object" | "json_schema", ...}`.
    pub response_format: Option<serde_json::Value>,
    /// llama-server's extensions: a GBNF grammar, or a JSON schema without the wrapping.
    pub grammar: Option<String>,
    pub json_schema: Option<serde_json::Value>,
}

#[derive(Deserialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Option<serde_json::Value>,
    pub tool_choice: Option<serde_json::Value>,
    /// llama-server's reasoning fields: `none` keeps the thinking in the answer.
    pub reasoning_format: Option<String>,
    /// Variables for the chat template (`{"enable_thinking": false}`).
    pub chat_template_kwargs: Option<Value>,
    /// Most tokens of thinking (-1: no limit).
    pub reasoning_budget_tokens: Option<i64>,
    pub thinking_budget_tokens: Option<i64>,
    /// OpenAI's effort (`"none"` turns thinking off; other values reach the template).
    pub reasoning_effort: Option<String>,
    #[serde(flatten)]
    pub sampling: Sampling,
}

#[derive(Deserialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: Prompt,
    pub echo: Option<bool>,
    pub suffix: Option<String>,
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// Parses a JSON body into `T`, turning every failure into an OpenAI-style 400.
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "the request body is not valid JSON"
        } else {
            "the request body does not match the API"
        };
        ApiError::bad_request(format!("{what}: {e}"), None)
    })
}

/// What a request asks for once its fields are checked.
pub struct Checked {
    pub max_tokens: Option<usize>,
    pub sampler: crate::sampling::SamplerParams,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    /// What the output must match, and the request field that asked for it.
    pub constraint: Option<(ConstraintSpec, &'static str)>,
    /// Chat: how the reply is split (its tools, its thinking).
    pub format: ReplyFormat,
    /// Chat: the markup tokens its text shows, and a thinking budget.
    pub markup: ReplyMarkup,
    /// Report log-probabilities with this many alternatives per token.
    pub logprobs: Option<usize>,
    /// Choices to generate over the one prompt (at most the server's slots).
    pub n: usize,
}

impl Sampling {
    pub fn check(&self, random_seed: u64) -> Result<Checked, ApiError> {
        let bad = |param: &str, message: String| Err(ApiError::bad_request(message, Some(param)));
        let n = self.n.unwrap_or(1);
        if n == 0 {
            return bad("n", "n must be at least 1".into());
        }
        let logprobs = self.logprobs()?;
        let max_tokens = self.max_completion_tokens.or(self.max_tokens);
        if max_tokens == Some(0) {
            return bad("max_tokens", "max_tokens must be at least 1".into());
        }
        let temperature = self.temperature.unwrap_or(1.0);
        if !(0.0..=2.0).contains(&temperature) {
            return bad(
                "temperature",
                format!("temperature {temperature} is not in [0, 2]"),
            );
        }
        let top_p = self.top_p.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return bad("top_p", format!("top_p {top_p} is not in (0, 1]"));
        }
        let min_p = self.min_p.unwrap_or(0.05);
        if !(0.0..=1.0).contains(&min_p) {
            return bad("min_p", format!("min_p {min_p} is not in [0, 1]"));
        }
        for (name, v) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if v.is_some_and(|v| !(-2.0..=2.0).contains(&v)) {
                return bad(name, format!("{name} {} is not in [-2, 2]", v.unwrap()));
            }
        }
        let stop = match &self.stop {
            None => Vec::new(),
            Some(OneOrMany::One(s)) => vec![s.clone()],
            Some(OneOrMany::Many(v)) => v.clone(),
        };
        if stop.len() > 4 {
            return bad(
                "stop",
                format!("at most 4 stop sequences, got {}", stop.len()),
            );
        }
        let sampler = crate::sampling::SamplerParams {
            temperature,
            top_k: self.top_k.unwrap_or(40),
            top_p,
            min_p,
            repeat_penalty: 1.0,
            frequency_penalty: self.frequency_penalty.unwrap_or(0.0),
            presence_penalty: self.presence_penalty.unwrap_or(0.0),
            // OpenAI's penalties count every token generated so far.
            penalty_last_n: usize::MAX,
            seed: self.seed.unwrap_or(random_seed),
        };
        let constraint = self.constraint()?;
        Ok(Checked {
            n: n.min(usize::MAX as u64) as usize,
            logprobs,
            constraint,
            format: ReplyFormat::default(),
            markup: ReplyMarkup::default(),
            max_tokens: max_tokens.map(|n| n.min(usize::MAX as u64) as usize),
            sampler,
            stop,
            stream: self.stream,
            include_usage: self
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage),
        })
    }
}

impl Sampling {
    /// `logprobs: true` (+ `top_logprobs`, chat) or `logprobs: N` (completions), at most 20.
    fn logprobs(&self) -> Result<Option<usize>, ApiError> {
        let bad = |param: &str, message: String| ApiError::bad_request(message, Some(param));
        let top = match self.top_logprobs {
            Some(n) if n > MAX_TOP_LOGPROBS as u64 => {
                return Err(bad(
                    "top_logprobs",
                    format!("top_logprobs {n} is above {MAX_TOP_LOGPROBS}"),
                ))
            }
            n => n.map(|n| n as usize),
        };
        let asked = match &self.logprobs {
            None | Some(Value::Null) | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(top.unwrap_or(0)),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(n) if n <= MAX_TOP_LOGPROBS as u64 => Some(n as usize),
                _ => {
                    return Err(bad(
                        "logprobs",
                        format!("logprobs {n} is not in 0..={MAX_TOP_LOGPROBS}"),
                    ))
                }
            },
            Some(_) => return Err(bad("logprobs", "logprobs is a boolean or a count".into())),
        };
        if asked.is_none() && top.is_some_and(|n| n > 0) {
            return Err(bad(
                "top_logprobs",
                "top_logprobs needs logprobs: true".into(),
            ));
        }
        Ok(asked)
    }

    /// The one constraint the request asks for (`response_format`, `grammar` or
    /// `json_schema`), not yet compiled.
    fn constraint(&self) -> Result<Option<(ConstraintSpec, &'static str)>, ApiError> {
        let bad = |param: &str, message: &str| ApiError::bad_request(message.into(), Some(param));
        let from_format = match &self.response_format {
            None | Some(Value::Null) => None,
            Some(format) => response_format(format)?.map(|spec| (spec, "response_format")),
        };
        let from_grammar = self
            .grammar
            .as_ref()
            .map(|g| (ConstraintSpec::Gbnf(g.clone()), "grammar"));
        let from_schema = match &self.json_schema {
            None | Some(Value::Null) => None,
            Some(schema) => Some((
                ConstraintSpec::JsonSchema(schema.to_string()),
                "json_schema",
            )),
        };
        let mut asked = [from_format, from_grammar, from_schema]
            .into_iter()
            .flatten();
        let first = asked.next();
        if let Some((_, second)) = asked.next() {
            return Err(bad(
                second,
                "give one of response_format, grammar and json_schema, not several",
            ));
        }
        Ok(first)
    }
}

/// OpenAI's `response_format` (and llama-server's `json_object` with a `schema`).
fn response_format(format: &Value) -> Result<Option<ConstraintSpec>, ApiError> {
    let bad = |message: String| ApiError::bad_request(message, Some("response_format"));
    let kind = format
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("response_format needs a string `type`".into()))?;
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(match format.get("schema") {
            Some(schema) if !schema.is_null() => ConstraintSpec::JsonSchema(schema.to_string()),
            _ => ConstraintSpec::JsonObject,
        })),
        "json_schema" => {
            let spec = format
                .get("json_schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    bad("a json_schema response_format needs a `json_schema` object".into())
                })?;
            // `strict` asks for exactly what the schema allows, which is all a mask ever gives.
            if spec
                .get("strict")
                .is_some_and(|s| !(s.is_boolean() || s.is_null()))
            {
                return Err(bad("json_schema.strict must be a boolean".into()));
            }
            let schema = spec.get("schema").filter(|s| !s.is_null());
            Ok(Some(ConstraintSpec::JsonSchema(
                schema.map_or_else(|| "{}".into(), Value::to_string),
            )))
        }
        other => Err(bad(format!(
            "response_format type {other:?} is not one of text, json_object, json_schema"
        ))),
    }
}

impl Message {
    /// The message as the chat template sees it (transformers' shape): the text, and the
    /// calls with their arguments as objects rather than JSON text.
    pub fn template_json(&self) -> Result<Value, ApiError> {
        let text = self.text()?;
        let mut m = serde_json::Map::new();
        m.insert("role".into(), Value::String(self.role.clone()));
        let calls = match &self.tool_calls {
            None | Some(Value::Null) => None,
            Some(Value::Array(calls)) => Some(calls.iter().map(call_for_template).collect()),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "tool_calls must be an array".into(),
                    Some("messages"),
                ))
            }
        };
        let content = if self.content.is_none() && calls.is_some() {
            Value::Null
        } else {
            Value::String(text)
        };
        m.insert("content".into(), content);
        if let Some(calls) = calls {
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), Value::String(id.clone()));
        }
        if let Some(name) = &self.name {
            m.insert("name".into(), Value::String(name.clone()));
        }
        if let Some(thinking) = &self.reasoning_content {
            add_thinking(&mut m, thinking);
        }
        Ok(Value::Object(m))
    }

    /// The message's text; text parts are joined, other parts are refused.
    pub fn text(&self) -> Result<String, ApiError> {
        match &self.content {
            None => Ok(String::new()),
            Some(Content::Text(t)) => Ok(t.clone()),
            Some(Content::Parts(parts)) => {
                let mut out = String::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => out.push_str(t),
                        (kind, _) => {
                            return Err(ApiError::bad_request(
                                format!("content parts of type {kind:?} are not supported"),
                                Some("messages"),
                            ))
                        }
                    }
                }
                Ok(out)
            }
        }
    }
}

/// An assistant turn's thinking under both names templates read: `reasoning_content` (Qwen3)
/// and `thinking` (gpt-oss).
pub fn add_thinking(m: &mut serde_json::Map<String, Value>, thinking: &str) {
    m.insert("reasoning_content".into(), Value::String(thinking.into()));
    m.insert("thinking".into(), Value::String(thinking.into()));
}

/// A call as templates read it: `function.arguments` an object where the JSON text parses.
fn call_for_template(call: &Value) -> Value {
    let mut call = call.clone();
    if let Some(args) = call.pointer_mut("/function/arguments") {
        if let Some(parsed) = args
            .as_str()
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
        {
            *args = parsed;
        }
    }
    call
}
