//! A chat reply as clients want it: the thinking apart from the answer (OpenAI's
//! `reasoning_content`, Ollama's `thinking`), and the tool calls apart from the text; and the
//! prompt side of that: template variables such as `enable_thinking`, a thinking budget, and
//! the markup tokens the reply's text must show.

use serde_json::{Map, Value};

use crate::batching::{ReplyMarkup, ThinkingBudget};
use crate::chat::reasoning::{Part, ReasoningSplitter, ReasoningSyntax};
use crate::chat::ChatTemplate;
use crate::tokenizer::Tokenizer;

use super::error::ApiError;
use super::tools::{Call, Piece, ToolStream};

/// What a request asks of its reply's thinking.
#[derive(Clone, Debug, Default)]
pub struct ThinkingOptions {
    /// Keep the thinking inline in the answer (`reasoning_format: "none"`).
    pub inline: bool,
    /// Variables for the template (`chat_template_kwargs`, `enable_thinking`, ...).
    pub kwargs: Map<String, Value>,
    /// Most tokens of thinking (`0`: none, where the template can turn it off).
    pub budget: Option<usize>,
}

impl ThinkingOptions {
    /// These options with a request's fields over them.
    pub fn overridden(
        &self,
        format: Option<&str>,
        kwargs: Option<&Value>,
        budget: Option<i64>,
    ) -> Result<ThinkingOptions, ApiError> {
        let mut out = self.clone();
        match format {
            None => {}
            Some("none") => out.inline = true,
            Some("auto" | "deepseek" | "deepseek-legacy") => out.inline = false,
            Some(other) => {
                return Err(ApiError::bad_request(
                    format!(
                        "reasoning_format {other:?} is not one of none, auto, deepseek, \
                         deepseek-legacy"
                    ),
                    Some("reasoning_format"),
                ))
            }
        }
        match kwargs {
            None | Some(Value::Null) => {}
            Some(Value::Object(k)) => out.kwargs.extend(k.clone()),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "chat_template_kwargs must be an object".into(),
                    Some("chat_template_kwargs"),
                ))
            }
        }
        if let Some(v) = out
            .kwargs
            .get("enable_thinking")
            .filter(|v| !v.is_boolean())
        {
            return Err(ApiError::bad_request(
                format!("enable_thinking must be true or false, not {v}"),
                Some("chat_template_kwargs"),
            ));
        }
        match budget {
            None => {}
            Some(-1) => out.budget = None,
            Some(n) if n >= 0 => out.budget = Some(n as usize),
            Some(n) => {
                return Err(ApiError::bad_request(
                    format!("a thinking budget is -1 (none) or a number of tokens, not {n}"),
                    Some("reasoning_budget_tokens"),
                ))
            }
        }
        Ok(out)
    }

    /// A reasoning effort for the template (`reasoning_effort`); `"none"` turns thinking
    /// off instead.
    pub fn set_effort(&mut self, effort: &str) {
        match effort {
            "none" => self.default_thinking(false),
            _ => {
                (self.kwargs).insert("reasoning_effort".into(), Value::String(effort.into()));
            }
        }
    }

    /// Sets `enable_thinking` unless the request set it itself.
    pub fn default_thinking(&mut self, on: bool) {
        self.kwargs
            .entry("enable_thinking")
            .or_insert(Value::Bool(on));
    }
}

/// A chat request's prompt, and how its reply is generated and split.
pub struct PreparedChat {
    pub rendered: String,
    pub format: ReplyFormat,
    pub markup: ReplyMarkup,
}

/// Renders a conversation for a reply with `opts`; `constrained` when a grammar shapes the
/// reply (a budget's forced tokens would break it, so there is none).
pub fn prepare_chat(
    template: &ChatTemplate,
    tokenizer: &Tokenizer,
    messages: &Value,
    tools: Option<&Value>,
    opts: &ThinkingOptions,
    constrained: bool,
) -> Result<PreparedChat, ApiError> {
    let mut opts = opts.clone();
    if opts.budget == Some(0) {
        opts.default_thinking(false);
    }
    let rendered = template
        .render_json_with(messages, tools, true, Some(&opts.kwargs))
        .map_err(|e| ApiError::bad_request(e.to_string(), Some("messages")))?;
    let Some(syntax) = template.reasoning_syntax() else {
        return Ok(PreparedChat {
            rendered,
            format: ReplyFormat::default(),
            markup: ReplyMarkup::default(),
        });
    };
    let opened = syntax.prompt_opens_reasoning(&rendered);
    let budget = (opts.budget)
        .filter(|_| !constrained)
        .map(|max_tokens| ThinkingBudget {
            syntax: syntax.clone(),
            opened,
            max_tokens,
            close: tokenizer.encode(syntax.closing_markup(), false, true),
        });
    Ok(PreparedChat {
        format: ReplyFormat {
            tools: None,
            reasoning: (!opts.inline).then(|| Reasoning {
                syntax: syntax.clone(),
                opened,
            }),
        },
        markup: ReplyMarkup {
            shown_tokens: syntax.marker_tokens(tokenizer),
            budget,
        },
        rendered,
    })
}

/// How a chat reply is split.
#[derive(Clone, Debug, Default)]
pub struct ReplyFormat {
    /// The tools a reply may call (its text is searched for calls); `None`: no tools.
    pub tools: Option<Vec<String>>,
    /// The thinking markup; `None`: the thinking stays in the answer.
    pub reasoning: Option<Reasoning>,
}

#[derive(Clone, Debug)]
pub struct Reasoning {
    pub syntax: ReasoningSyntax,
    /// The prompt left the model thinking.
    pub opened: bool,
}

#[derive(Debug, PartialEq)]
pub enum ReplyPiece {
    Reasoning(String),
    Text(String),
    Call(Call),
    /// The last this many bytes of reasoning were the start of thinking that never closed:
    /// the text that follows repeats them as answer. A stream has sent them; a whole reply
    /// drops them from its reasoning.
    Retract(usize),
}

/// Splits a chat reply as it streams.
pub struct ReplySplitter {
    reasoning: Option<ReasoningSplitter>,
    tools: Option<ToolStream>,
    /// Calls the reasoning markup made (Harmony).
    markup_calls: usize,
}

impl ReplySplitter {
    pub fn new(format: &ReplyFormat) -> ReplySplitter {
        ReplySplitter {
            reasoning: (format.reasoning.as_ref())
                .map(|r| ReasoningSplitter::new(&r.syntax, r.opened, format.tools.clone())),
            tools: format.tools.clone().map(ToolStream::new),
            markup_calls: 0,
        }
    }

    pub fn push(&mut self, text: &str) -> Vec<ReplyPiece> {
        match &mut self.reasoning {
            Some(r) => {
                let parts = r.push(text);
                self.parts(parts)
            }
            None => self.answer(text),
        }
    }

    /// The rest, at the end of the reply.
    pub fn finish(&mut self) -> Vec<ReplyPiece> {
        let mut out = match &mut self.reasoning {
            Some(r) => {
                let parts = r.finish();
                self.parts(parts)
            }
            None => Vec::new(),
        };
        if let Some(tools) = &mut self.tools {
            out.extend(tools.finish().into_iter().map(from_piece));
        }
        out
    }

    /// Whether the reply called a tool.
    pub fn saw_calls(&self) -> bool {
        self.markup_calls > 0 || self.tools.as_ref().is_some_and(ToolStream::saw_calls)
    }

    fn parts(&mut self, parts: Vec<Part>) -> Vec<ReplyPiece> {
        let mut out = Vec::new();
        for part in parts {
            match part {
                Part::Reasoning(r) => out.push(ReplyPiece::Reasoning(r)),
                Part::Content(c) => out.extend(self.answer(&c)),
                Part::Call { name, arguments } => {
                    self.markup_calls += 1;
                    out.push(ReplyPiece::Call(Call { name, arguments }));
                }
                Part::Unfinished { raw, emitted } => {
                    out.push(ReplyPiece::Retract(emitted));
                    out.extend(self.answer(&raw));
                }
            }
        }
        out
    }

    /// Answer text, searched for tool calls when the request has tools.
    fn answer(&mut self, text: &str) -> Vec<ReplyPiece> {
        match &mut self.tools {
            Some(tools) => tools.push(text).into_iter().map(from_piece).collect(),
            None if text.is_empty() => Vec::new(),
            None => vec![ReplyPiece::Text(text.to_string())],
        }
    }
}

fn from_piece(p: Piece) -> ReplyPiece {
    match p {
        Piece::Text(t) => ReplyPiece::Text(t),
        Piece::Call(c) => ReplyPiece::Call(c),
    }
}

/// A whole reply, split.
#[derive(Debug, Default, PartialEq)]
pub struct WholeReply {
    pub reasoning: String,
    pub content: String,
    pub calls: Vec<Call>,
}

impl WholeReply {
    pub fn split(format: &ReplyFormat, text: &str) -> WholeReply {
        let mut s = ReplySplitter::new(format);
        let mut pieces = s.push(text);
        pieces.extend(s.finish());
        let mut whole = WholeReply::default();
        for p in pieces {
            whole.add(p);
        }
        if !whole.calls.is_empty() {
            whole.content = whole.content.trim().to_string();
        }
        whole
    }

    /// Adds a piece (a stream's, gathered).
    pub fn add(&mut self, piece: ReplyPiece) {
        match piece {
            ReplyPiece::Reasoning(r) => self.reasoning.push_str(&r),
            ReplyPiece::Text(t) => self.content.push_str(&t),
            ReplyPiece::Call(c) => self.calls.push(c),
            ReplyPiece::Retract(n) => {
                let keep = self.reasoning.len().saturating_sub(n);
                self.reasoning.truncate(keep);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn think_format(tools: Option<Vec<String>>) -> ReplyFormat {
        ReplyFormat {
            tools,
            reasoning: Some(Reasoning {
                syntax: ReasoningSyntax::tags("<think>", "</think>"),
                opened: false,
            }),
        }
    }

    #[test]
    fn thinking_then_a_tool_call() {
        let reply = "<think>Need the weather.</think>\n<tool_call>\n{\"name\": \"w\", \
                     \"arguments\": {}}\n</tool_call>";
        let whole = WholeReply::split(&think_format(Some(vec!["w".into()])), reply);
        assert_eq!(whole.reasoning, "Need the weather.");
        assert_eq!(whole.content, "");
        assert_eq!(whole.calls.len(), 1);
        // Without tools the call stays text; inline, nothing is split.
        let plain = WholeReply::split(&think_format(None), reply);
        assert!(plain.calls.is_empty() && plain.content.starts_with("<tool_call>"));
        let inline = WholeReply::split(&ReplyFormat::default(), reply);
        assert_eq!(inline.content, reply);
    }

    #[test]
    fn unfinished_thinking_is_answer_in_a_whole_reply() {
        let whole = WholeReply::split(&think_format(None), "<think>no end");
        assert_eq!(
            (whole.reasoning.as_str(), whole.content.as_str()),
            ("", "<think>no end")
        );
    }

    #[test]
    fn request_fields_override_the_server() {
        let server = ThinkingOptions::default();
        let o = server
            .overridden(
                Some("none"),
                Some(&serde_json::json!({"enable_thinking": false})),
                Some(12),
            )
            .unwrap();
        assert!(o.inline);
        assert_eq!(o.kwargs["enable_thinking"], Value::Bool(false));
        assert_eq!(o.budget, Some(12));
        for (format, kwargs, budget, param) in [
            (Some("sometimes"), None, None, "reasoning_format"),
            (
                None,
                Some(serde_json::json!([1])),
                None,
                "chat_template_kwargs",
            ),
            (
                None,
                Some(serde_json::json!({"enable_thinking": "no"})),
                None,
                "chat_template_kwargs",
            ),
            (None, None, Some(-5), "reasoning_budget_tokens"),
        ] {
            let e = server
                .overridden(format, kwargs.as_ref(), budget)
                .expect_err("refused");
            assert_eq!(e.body()["error"]["param"], param);
        }
    }
}
