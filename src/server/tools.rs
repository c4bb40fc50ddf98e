//! Tool calling as OpenAI's chat API has it, over the form Hermes-style templates (Qwen's
//! among them) teach their models: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`.
//!
//! The tool definitions go to the chat template as transformers passes them; the reply is
//! split into its text and its calls (whole, or piece by piece while streaming); with
//! `tool_choice` `required` or a named function the reply is constrained to such a call, so it
//! always parses.

use crate::chat::reasoning::partial_suffix;
use crate::grammar::ConstraintSpec;
use serde_json::{json, Map, Value};

use super::error::ApiError;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// What a request's `tools` and `tool_choice` ask for.
pub struct ToolSetup {
    /// The definitions the template sees; `None` without tools or with `tool_choice` `none`.
    pub template_tools: Option<Value>,
    /// The tools a reply may call.
    names: Vec<String>,
    /// With `tool_choice` `required` or a named function: the grammar of the whole reply.
    pub constraint: Option<ConstraintSpec>,
}

impl ToolSetup {
    /// The tools a reply may call, when replies are searched for calls.
    pub fn names(&self) -> Option<Vec<String>> {
        self.template_tools.as_ref().map(|_| self.names.clone())
    }
}

/// Checks `tools` and `tool_choice` (400s name the field at fault).
pub fn setup(tools: Option<&Value>, choice: Option<&Value>) -> Result<ToolSetup, ApiError> {
    let tools = match tools {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list.iter().map(check_tool).collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("tools", "tools must be an array".into())),
    };
    let choice = match choice {
        None | Some(Value::Null) => "auto".to_string(),
        Some(Value::String(s)) if ["auto", "none", "required"].contains(&s.as_str()) => s.clone(),
        Some(named) => {
            match named.pointer("/function/name").and_then(Value::as_str) {
                Some(name) if named.get("type").and_then(Value::as_str) == Some("function") => {
                    if !tools.iter().any(|t| t.name == name) {
                        return Err(bad(
                            "tool_choice",
                            format!("no tool named {name:?} was given"),
                        ));
                    }
                    format!("function:{name}")
                }
                _ => return Err(bad(
                    "tool_choice",
                    "tool_choice is \"auto\", \"none\", \"required\" or {\"type\": \"function\", \
                     \"function\": {\"name\": ...}}"
                        .into(),
                )),
            }
        }
    };
    if tools.is_empty() {
        if choice != "auto" && choice != "none" {
            return Err(bad("tool_choice", "tool_choice needs tools".into()));
        }
        return Ok(ToolSetup {
            template_tools: None,
            names: Vec::new(),
            constraint: None,
        });
    }
    let callable: Vec<&Tool> = match choice.strip_prefix("function:") {
        Some(name) => tools.iter().filter(|t| t.name == name).collect(),
        None => tools.iter().collect(),
    };
    let constraint = match choice.as_str() {
        "auto" | "none" => None,
        _ => Some(call_grammar(&callable)?),
    };
    let names = callable.iter().map(|t| t.name.clone()).collect();
    Ok(ToolSetup {
        names,
        template_tools: (choice != "none")
            .then(|| Value::Array(tools.into_iter().map(|t| t.definition).collect())),
        constraint,
    })
}

struct Tool {
    name: String,
    parameters: Value,
    /// The definition as the client sent it, for the template.
    definition: Value,
}

fn check_tool(t: &Value) -> Result<Tool, ApiError> {
    if t.get("type").and_then(Value::as_str) != Some("function") {
        return Err(bad(
            "tools",
            "each tool is {\"type\": \"function\", ...}".into(),
        ));
    }
    let function = t
        .get("function")
        .filter(|f| f.is_object())
        .ok_or_else(|| bad("tools", "a tool needs a `function` object".into()))?;
    let name = function.get("name").and_then(Value::as_str).unwrap_or("");
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !valid {
        return Err(bad(
            "tools",
            format!("tool name {name:?} is not 1-64 of a-z, A-Z, 0-9, _, - and ."),
        ));
    }
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p) if p.is_object() => p.clone(),
        Some(_) => {
            return Err(bad(
                "tools",
                format!("the parameters of {name:?} are not a schema"),
            ))
        }
    };
    Ok(Tool {
        name: name.to_string(),
        parameters,
        definition: t.clone(),
    })
}

/// A reply that is exactly one call of one of `tools`: the call's JSON checked against that
/// tool's parameter schema. Each schema's `$defs`/`definitions` move to the root, where
/// their `#/$defs/...` references then point.
fn call_grammar(tools: &[&Tool]) -> Result<ConstraintSpec, ApiError> {
    let mut defs = Map::new();
    let mut alternatives = Vec::new();
    for tool in tools {
        let mut params = tool.parameters.clone();
        for key in ["$defs", "definitions"] {
            let Some(Value::Object(inner)) = params.as_object_mut().and_then(|p| p.remove(key))
            else {
                continue;
            };
            let root = defs
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("made as an object");
            for (name, schema) in inner {
                if root.get(&name).is_some_and(|known| *known != schema) {
                    return Err(bad(
                        "tools",
                        format!("two tools define {key}/{name} differently"),
                    ));
                }
                root.insert(name, schema);
            }
        }
        alternatives.push(json!({
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": params},
            "required": ["name", "arguments"],
            "additionalProperties": false,
        }));
    }
    let mut schema = Map::new();
    schema.insert("anyOf".into(), Value::Array(alternatives));
    schema.extend(defs);
    // Laid out as the templates show calls, with no room for runs of whitespace.
    schema.insert(
        "x-guidance".into(),
        json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}),
    );
    Ok(ConstraintSpec::Lark(format!(
        "start: {} %json {} {}\n",
        lark_string(&format!("{OPEN}\n")),
        Value::Object(schema),
        lark_string(&format!("\n{CLOSE}")),
    )))
}

fn lark_string(s: &str) -> String {
    Value::String(s.into()).to_string()
}

#[derive(Debug, PartialEq)]
pub struct Call {
    pub name: String,
    /// JSON text.
    pub arguments: String,
}

impl Call {
    /// The OpenAI `tool_calls` entry.
    pub fn to_json(&self, id: &str, index: Option<usize>) -> Value {
        let mut v = json!({
            "id": id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        });
        if let Some(i) = index {
            v["index"] = json!(i);
        }
        v
    }
}

#[derive(Debug, PartialEq)]
pub enum Piece {
    Text(String),
    Call(Call),
}

/// Splits a streamed reply as it arrives: text passes on at once, except what may be the
/// start of `<tool_call>`; a call passes on whole when its `</tool_call>` arrives.
///
/// Small models asked for a call sometimes write the bare JSON instead, often in a code
/// fence (llama.cpp's Hermes parser accepts that too): a reply that opens with `{` or a
/// fence (or `[`) is held to its end, and counts as calls if it is exactly calls of known
/// tools.
pub struct ToolStream {
    names: Vec<String>,
    pending: String,
    in_call: bool,
    calls: usize,
    /// `None` until the reply's first visible character says whether it may be bare JSON.
    bare: Option<bool>,
}

impl ToolStream {
    pub fn new(names: Vec<String>) -> ToolStream {
        ToolStream {
            names,
            pending: String::new(),
            in_call: false,
            calls: 0,
            bare: None,
        }
    }

    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.pending.push_str(text);
        if self.bare.is_none() {
            self.bare = self
                .pending
                .trim_start()
                .chars()
                .next()
                .map(|c| matches!(c, '{' | '[' | '`'));
        }
        if self.bare != Some(false) {
            return Vec::new();
        }
        self.split_tagged()
    }

    fn split_tagged(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        loop {
            if self.in_call {
                let Some(end) = self.pending.find(CLOSE) else {
                    break;
                };
                let body: String = self.pending.drain(..end + CLOSE.len()).collect();
                self.in_call = false;
                out.push(self.call_or_text(&body[..end]));
            } else if let Some(start) = self.pending.find(OPEN) {
                let before: String = self.pending.drain(..start + OPEN.len()).collect();
                self.text(&before[..start], &mut out);
                self.in_call = true;
            } else {
                let keep = partial_suffix(&self.pending, OPEN);
                let ready: String = self.pending.drain(..self.pending.len() - keep).collect();
                self.text(&ready, &mut out);
                break;
            }
        }
        out
    }

    /// The rest at the end of the reply: an unterminated call still counts if it parses.
    pub fn finish(&mut self) -> Vec<Piece> {
        if self.bare == Some(true) {
            if let Some(calls) = parse_bare(&self.pending, &self.names) {
                self.pending.clear();
                self.calls += calls.len();
                return calls.into_iter().map(Piece::Call).collect();
            }
        }
        let mut out = self.split_tagged();
        let rest = std::mem::take(&mut self.pending);
        if self.in_call {
            self.in_call = false;
            out.push(self.call_or_text(&rest));
        } else {
            self.text(&rest, &mut out);
        }
        out
    }

    /// Whether any call has been passed on.
    pub fn saw_calls(&self) -> bool {
        self.calls > 0
    }

    /// Text between calls is only the whitespace that separates them; it is dropped.
    fn text(&self, text: &str, out: &mut Vec<Piece>) {
        let separator = self.calls > 0 && text.trim().is_empty();
        if !text.is_empty() && !separator {
            out.push(Piece::Text(text.to_string()));
        }
    }

    fn call_or_text(&mut self, body: &str) -> Piece {
        match parse_call(body) {
            Some(call) => {
                self.calls += 1;
                Piece::Call(call)
            }
            None => Piece::Text(format!("{OPEN}{body}{CLOSE}")),
        }
    }
}

/// `{"name": ..., "arguments": {...}}` (arguments may also come as a JSON string or under
/// `parameters`).
fn parse_call(body: &str) -> Option<Call> {
    let v: Value = serde_json::from_str(body.trim()).ok()?;
    let name = v.get("name")?.as_str()?.to_string();
    let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(args) => args.to_string(),
    };
    Some(Call { name, arguments })
}

/// A whole reply that is only calls of the named tools, as a JSON object or array, perhaps in
/// a code fence.
fn parse_bare(reply: &str, names: &[String]) -> Option<Vec<Call>> {
    let mut body = reply.trim();
    if let Some(fenced) = body.strip_prefix("```") {
        body = fenced.split_once('\n')?.1.trim_end().strip_suffix("```")?;
    }
    let items = match serde_json::from_str::<Value>(body).ok()? {
        Value::Array(items) => items,
        one => vec![one],
    };
    let calls: Vec<Call> = items
        .iter()
        .map(|item| parse_call(&item.to_string()).filter(|c| names.contains(&c.name)))
        .collect::<Option<_>>()?;
    (!calls.is_empty()).then_some(calls)
}

fn bad(param: &str, message: String) -> ApiError {
    ApiError::bad_request(message, Some(param))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply split into its text and its tool calls (each `{"name", "arguments"}` with the
    /// arguments as JSON text, as OpenAI sends them). Without a parsable call the text is the
    /// reply unchanged.
    fn split_reply(text: &str, names: &[String]) -> (String, Vec<Call>) {
        let mut stream = ToolStream::new(names.to_vec());
        let mut pieces = stream.push(text);
        pieces.extend(stream.finish());
        let mut content = String::new();
        let mut calls = Vec::new();
        for p in pieces {
            match p {
                Piece::Text(t) => content.push_str(&t),
                Piece::Call(c) => calls.push(c),
            }
        }
        if !calls.is_empty() {
            content = content.trim().to_string();
        }
        (content, calls)
    }

    fn call(name: &str, arguments: &str) -> Piece {
        Piece::Call(Call {
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    #[test]
    fn a_reply_splits_into_text_and_calls() {
        let reply = "Let me look.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": \
                     {\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"time\", \
                     \"arguments\": {}}\n</tool_call>";
        let names = vec!["weather".to_string(), "time".to_string()];
        let (content, calls) = split_reply(reply, &names);
        assert_eq!(content, "Let me look.");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "weather");
        assert_eq!(calls[0].arguments, "{\"city\":\"Oslo\"}");
        assert_eq!(
            split_reply("no calls here <b>", &names).0,
            "no calls here <b>"
        );
        let broken = "<tool_call>\n{not json}\n</tool_call>";
        assert_eq!(split_reply(broken, &names), (broken.to_string(), vec![]));
        let unterminated = "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}";
        assert_eq!(split_reply(unterminated, &names).1[0].arguments, "{}");
        // Bare JSON, fenced or not, counts only when it is calls of known tools.
        let fenced = "```json\n{\"name\": \"time\", \"arguments\": {\"zone\": \"UTC\"}}\n```";
        assert_eq!(split_reply(fenced, &names).1[0].name, "time");
        let two = "[{\"name\": \"time\", \"arguments\": {}}, {\"name\": \"weather\"}]";
        assert_eq!(split_reply(two, &names).1.len(), 2);
        for not_calls in [
            "{\"name\": \"other\", \"arguments\": {}}",
            "{\"a\": 1}",
            "```\nx\n```",
        ] {
            assert_eq!(
                split_reply(not_calls, &names),
                (not_calls.to_string(), vec![])
            );
        }
    }

    #[test]
    fn streaming_holds_back_only_what_may_open_a_call() {
        let mut s = ToolStream::new(vec!["f".into()]);
        assert_eq!(s.push("Hi <"), vec![Piece::Text("Hi ".into())]);
        assert_eq!(s.push("b>"), vec![Piece::Text("<b>".into())]);
        assert_eq!(s.push("<tool_"), vec![]);
        assert_eq!(s.push("call>\n{\"name\": \"f\", \"argu"), vec![]);
        assert_eq!(
            s.push("ments\": {\"x\": 1}}\n</tool_call>\n"),
            vec![call("f", "{\"x\":1}")]
        );
        assert!(s.saw_calls());
        assert_eq!(s.finish(), vec![]);
    }

    #[test]
    fn tool_choice_is_checked_against_the_tools() {
        let tools = json!([{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        let named = json!({"type": "function", "function": {"name": "get_weather"}});
        assert!(setup(Some(&tools), Some(&named))
            .unwrap()
            .constraint
            .is_some());
        assert!(setup(Some(&tools), None).unwrap().constraint.is_none());
        assert!(setup(Some(&tools), Some(&json!("none")))
            .unwrap()
            .template_tools
            .is_none());
        let unknown = json!({"type": "function", "function": {"name": "nope"}});
        for (tools, choice, param) in [
            (Some(&tools), Some(&unknown), "tool_choice"),
            (Some(&tools), Some(&json!("sometimes")), "tool_choice"),
            (None, Some(&json!("required")), "tool_choice"),
            (Some(&json!({"a": 1})), None, "tools"),
            (
                Some(&json!([{"type": "function", "function": {"name": "bad name"}}])),
                None,
                "tools",
            ),
            (Some(&json!([{"type": "retrieval"}])), None, "tools"),
        ] {
            let e = setup(tools, choice).err().expect("refused");
            assert_eq!(e.body()["error"]["param"], param);
        }
    }
}
