//! A reasoning model's reply split into its thinking, its answer and (Harmony) its tool calls,
//! as the text streams in.
//!
//! Two markups are known:
//! - tags: `<think>…</think>` at the start of the reply (Qwen3/3.5, DeepSeek R1 and others);
//!   a prompt that already opened the block (`…<think>\n`) starts the reply inside it;
//! - Harmony (gpt-oss): messages `<|channel|>NAME[ to=RECIPIENT][ <|constrain|>json]<|message|>
//!   BODY<|end|>`, the next one after `<|start|>assistant`; `analysis` is thinking, `final` the
//!   answer, a message to `functions.NAME` a tool call.
//!
//! Nothing is lost: text that does not follow the markup stays in the answer, and thinking
//! that never closes (the reply ran out of tokens, or the markup broke) ends as answer text
//! too ([`Part::Unfinished`]).

use crate::tokenizer::{TokenId, Tokenizer};

/// How a model's replies mark their thinking.
#[derive(Clone, Debug, PartialEq)]
pub enum ReasoningSyntax {
    /// A block between two tags at the start of the reply.
    Tags { open: String, close: String },
    /// OpenAI's Harmony channels.
    Harmony,
}

const H_START: &str = "<|start|>";
const H_CHANNEL: &str = "<|channel|>";
const H_MESSAGE: &str = "<|message|>";
const H_END: &str = "<|end|>";
const H_CALL: &str = "<|call|>";
const H_RETURN: &str = "<|return|>";
const H_CONSTRAIN: &str = "<|constrain|>";
/// What may end a Harmony message's body.
const H_BODY_ENDS: [&str; 4] = [H_END, H_CALL, H_RETURN, H_START];
/// Longest header (`<|start|>assistant<|channel|>commentary to=functions.NAME …`) held while
/// waiting for its `<|message|>`; past it the text is not Harmony.
const H_MAX_HEADER: usize = 512;

impl ReasoningSyntax {
    /// The markup a chat template teaches its model, read from the template's source.
    pub fn detect(template: &str) -> Option<ReasoningSyntax> {
        if template.contains(H_CHANNEL) && template.contains(H_MESSAGE) {
            return Some(ReasoningSyntax::Harmony);
        }
        if template.contains("</think>") {
            return Some(Self::tags("<think>", "</think>"));
        }
        // Gemma 4 thinks in a `thought` channel of its own tokens.
        if template.contains("<|channel>") && template.contains("<channel|>") {
            return Some(Self::tags("<|channel>thought", "<channel|>"));
        }
        None
    }

    pub fn tags(open: &str, close: &str) -> ReasoningSyntax {
        ReasoningSyntax::Tags {
            open: open.into(),
            close: close.into(),
        }
    }

    /// The markup strings, which must reach the splitter as text even where the vocabulary
    /// has them as control tokens (a decoder hides those otherwise).
    pub fn markers(&self) -> Vec<&str> {
        match self {
            ReasoningSyntax::Tags { open, close } => vec![open, close],
            ReasoningSyntax::Harmony => vec![
                H_START,
                H_CHANNEL,
                H_MESSAGE,
                H_END,
                H_CALL,
                H_RETURN,
                H_CONSTRAIN,
            ],
        }
    }

    /// The markup strings that are single tokens of `tokenizer`'s vocabulary, for
    /// [`crate::tokenizer::StreamDecoder::showing`].
    pub fn marker_tokens(&self, tokenizer: &Tokenizer) -> Vec<TokenId> {
        (self.markers().into_iter())
            .filter_map(|m| match tokenizer.encode(m, false, true)[..] {
                [one] => Some(one),
                _ => None,
            })
            .collect()
    }

    /// What ends the thinking when a budget runs out: the closing tag, or (Harmony) the end
    /// of the analysis message and the final answer's header.
    pub fn closing_markup(&self) -> &str {
        match self {
            ReasoningSyntax::Tags { close, .. } => close,
            ReasoningSyntax::Harmony => "<|end|><|start|>assistant<|channel|>final<|message|>",
        }
    }

    /// Whether a rendered prompt leaves the model inside its thinking (the template wrote the
    /// opening tag itself).
    pub fn prompt_opens_reasoning(&self, prompt: &str) -> bool {
        match self {
            ReasoningSyntax::Tags { open, .. } => prompt.trim_end().ends_with(open.as_str()),
            ReasoningSyntax::Harmony => prompt
                .trim_end()
                .ends_with("<|channel|>analysis<|message|>"),
        }
    }
}

/// A piece of a split reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Reasoning(String),
    Content(String),
    /// A tool call written in the markup (Harmony), arguments as JSON text.
    Call {
        name: String,
        arguments: String,
    },
    /// Thinking that never closed: `raw` (the markup included) is answer text after all, and
    /// the last `emitted` bytes of reasoning already passed on were its start.
    Unfinished {
        raw: String,
        emitted: usize,
    },
}

/// Splits a reply as it streams; text is held back only while it may be the start of markup.
pub struct ReasoningSplitter {
    mode: Mode,
    /// Text received and not yet handled.
    pending: String,
    /// The tools a Harmony call may name (`None`: any).
    tools: Option<Vec<String>>,
}

enum Mode {
    /// Tags: before the reply shows whether it opens with the tag.
    TagStart { open: String, close: String },
    /// Inside a thinking block (tags, or a Harmony `analysis` message).
    Thinking(Thought),
    /// Harmony: reading a message header up to `<|message|>`.
    Header,
    /// Harmony: a message body.
    Body(Channel),
    /// Answer text; with `trim_start`, whitespace before the first visible character goes.
    Answer { trim_start: bool },
}

struct Thought {
    /// The tag that ends it (tags) or `None` (Harmony: any body end).
    close: Option<String>,
    /// Everything it has consumed, markup included, for [`Part::Unfinished`].
    raw: String,
    emitted: usize,
    /// Whitespace held back: it is passed on only if more thinking follows.
    held_space: String,
    started: bool,
}

enum Channel {
    /// `final`, or `commentary` to the user: answer text.
    Answer,
    /// A call to a tool: the body (held in `pending` until it ends) is its arguments.
    Call { name: String, raw_header: String },
}

impl ReasoningSplitter {
    /// A splitter for replies in `syntax`; `opened` when the prompt left the model thinking.
    pub fn new(syntax: &ReasoningSyntax, opened: bool, tools: Option<Vec<String>>) -> Self {
        let mode = match (syntax, opened) {
            (ReasoningSyntax::Tags { close, .. }, true) => {
                Mode::Thinking(Thought::new(Some(close.clone()), String::new()))
            }
            (ReasoningSyntax::Tags { open, close }, false) => Mode::TagStart {
                open: open.clone(),
                close: close.clone(),
            },
            (ReasoningSyntax::Harmony, true) => Mode::Thinking(Thought::new(None, String::new())),
            (ReasoningSyntax::Harmony, false) => Mode::Header,
        };
        ReasoningSplitter {
            mode,
            pending: String::new(),
            tools,
        }
    }

    /// Whether the reply is inside its thinking now.
    pub fn in_reasoning(&self) -> bool {
        matches!(self.mode, Mode::Thinking(_))
    }

    pub fn push(&mut self, text: &str) -> Vec<Part> {
        self.pending.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out, false) {}
        out
    }

    /// The rest at the end of the reply.
    pub fn finish(&mut self) -> Vec<Part> {
        let mut out = Vec::new();
        while self.step(&mut out, true) {}
        let rest = std::mem::take(&mut self.pending);
        match std::mem::replace(&mut self.mode, Mode::Answer { trim_start: false }) {
            Mode::Thinking(t) => out.push(Part::Unfinished {
                raw: t.raw + &rest,
                emitted: t.emitted,
            }),
            Mode::Body(Channel::Call { name, raw_header }) => {
                out.push(self.call(name, raw_header, rest))
            }
            _ => push_content(&mut out, rest),
        }
        out
    }

    /// Handles what it can of `pending`; `true` when the mode changed and there may be more.
    fn step(&mut self, out: &mut Vec<Part>, at_end: bool) -> bool {
        match &mut self.mode {
            Mode::TagStart { open, close } => {
                let t = self.pending.trim_start();
                if let Some(after) = t.strip_prefix(open.as_str()) {
                    let raw = self.pending[..self.pending.len() - after.len()].to_string();
                    self.pending = after.to_string();
                    self.mode = Mode::Thinking(Thought::new(Some(close.clone()), raw));
                    return true;
                }
                if open.starts_with(t) && !at_end {
                    return false;
                }
                self.mode = Mode::Answer { trim_start: false };
                true
            }
            Mode::Thinking(thought) => {
                let close = thought.close.clone();
                let ends = match &close {
                    Some(close) => vec![close.as_str()],
                    None => H_BODY_ENDS.to_vec(),
                };
                let Some((at, end)) = first_of(&self.pending, &ends) else {
                    thought.take(&take_ready(&mut self.pending, &ends, at_end), out);
                    return false;
                };
                let body: String = self.pending.drain(..at).collect();
                thought.take(&body, out);
                let tags = thought.close.is_some();
                if tags || end != H_START {
                    self.pending.drain(..end.len());
                }
                self.mode = if tags {
                    Mode::Answer { trim_start: true }
                } else {
                    Mode::Header
                };
                true
            }
            Mode::Header => self.header(out, at_end),
            Mode::Body(channel) => {
                let Some((at, end)) = first_of(&self.pending, &H_BODY_ENDS) else {
                    if let Channel::Answer = channel {
                        push_content(out, take_ready(&mut self.pending, &H_BODY_ENDS, at_end));
                    }
                    return false;
                };
                let body: String = self.pending.drain(..at).collect();
                if end != H_START {
                    self.pending.drain(..end.len());
                }
                match std::mem::replace(&mut self.mode, Mode::Header) {
                    Mode::Body(Channel::Call { name, raw_header }) => {
                        out.push(self.call(name, raw_header, body))
                    }
                    _ => push_content(out, body),
                }
                true
            }
            Mode::Answer { trim_start } => {
                if *trim_start {
                    let trimmed = self.pending.trim_start().len();
                    self.pending.drain(..self.pending.len() - trimmed);
                    if self.pending.is_empty() {
                        return false;
                    }
                    *trim_start = false;
                }
                push_content(out, std::mem::take(&mut self.pending));
                false
            }
        }
    }

    /// A Harmony header: held until its `<|message|>`, then the body's mode. Text that is not
    /// a header is answer text, and so is the rest of the reply.
    fn header(&mut self, out: &mut Vec<Part>, at_end: bool) -> bool {
        let t = self.pending.trim_start();
        if t.is_empty() {
            return false;
        }
        let looks_like_markup = t.starts_with("<|") || "<|".starts_with(t);
        let Some(at) = self.pending.find(H_MESSAGE).filter(|_| looks_like_markup) else {
            if looks_like_markup && !at_end && self.pending.len() <= H_MAX_HEADER {
                return false;
            }
            self.mode = Mode::Answer { trim_start: false };
            return true;
        };
        let raw_header: String = self.pending.drain(..at + H_MESSAGE.len()).collect();
        let header = &raw_header[..at];
        let channel = field_after(header, H_CHANNEL).unwrap_or_default();
        let recipient = header
            .split(|c: char| c.is_whitespace() || c == '<')
            .find_map(|w| w.strip_prefix("to="));
        self.mode = match (channel, recipient) {
            (_, Some(to)) => {
                let name = to.strip_prefix("functions.").unwrap_or(to).to_string();
                Mode::Body(Channel::Call { name, raw_header })
            }
            ("analysis", None) => Mode::Thinking(Thought::new(None, raw_header)),
            ("final" | "commentary", None) => Mode::Body(Channel::Answer),
            // An unknown channel: its markup stays with its text.
            _ => {
                push_content(out, raw_header);
                Mode::Body(Channel::Answer)
            }
        };
        true
    }

    /// A finished call message: a call if its body is JSON and its tool is known, else text.
    fn call(&self, name: String, raw_header: String, body: String) -> Part {
        let known = (self.tools.as_ref()).is_none_or(|tools| tools.contains(&name));
        match serde_json::from_str::<serde_json::Value>(body.trim()) {
            Ok(args) if known => Part::Call {
                name,
                arguments: args.to_string(),
            },
            _ => Part::Content(raw_header + &body),
        }
    }
}

impl Thought {
    fn new(close: Option<String>, raw: String) -> Thought {
        Thought {
            close,
            raw,
            emitted: 0,
            held_space: String::new(),
            started: false,
        }
    }

    /// Passes `text` on as reasoning, without the block's leading and trailing whitespace.
    fn take(&mut self, text: &str, out: &mut Vec<Part>) {
        self.raw.push_str(text);
        let mut t = text;
        if !self.started {
            t = t.trim_start();
            if t.is_empty() {
                return;
            }
            self.started = true;
        }
        let body = t.trim_end();
        let mut ready = std::mem::take(&mut self.held_space);
        if body.is_empty() {
            self.held_space = ready + t;
            return;
        }
        ready.push_str(body);
        self.held_space = t[body.len()..].to_string();
        self.emitted += ready.len();
        out.push(Part::Reasoning(ready));
    }
}

fn push_content(out: &mut Vec<Part>, text: String) {
    if !text.is_empty() {
        out.push(Part::Content(text));
    }
}

/// Drains what of `pending` is text for sure: all of it at the end of the reply, else all
/// but an end that may be the start of one of `ends`.
fn take_ready(pending: &mut String, ends: &[&str], at_end: bool) -> String {
    let keep = match at_end {
        true => 0,
        false => (ends.iter().map(|e| partial_suffix(pending, e)))
            .max()
            .unwrap_or(0),
    };
    pending.drain(..pending.len() - keep).collect()
}

/// The earliest of `ends` in `text`: its byte offset and which.
fn first_of<'e>(text: &str, ends: &[&'e str]) -> Option<(usize, &'e str)> {
    ends.iter()
        .filter_map(|e| text.find(e).map(|at| (at, *e)))
        .min_by_key(|&(at, _)| at)
}

/// The word after `marker` in a header (`<|channel|>analysis` -> `analysis`).
fn field_after<'h>(header: &'h str, marker: &str) -> Option<&'h str> {
    let rest = &header[header.find(marker)? + marker.len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '<')
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The length of the longest end of `text` that begins `tag`.
pub fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

/// A whole reply, split: (reasoning, content, calls). Unfinished thinking is content.
pub fn split_whole(
    syntax: &ReasoningSyntax,
    opened: bool,
    tools: Option<Vec<String>>,
    reply: &str,
) -> (String, String, Vec<(String, String)>) {
    let mut s = ReasoningSplitter::new(syntax, opened, tools);
    let mut parts = s.push(reply);
    parts.extend(s.finish());
    let mut joined = Joined::default();
    for p in parts {
        joined.add(p);
    }
    (joined.reasoning, joined.content, joined.calls)
}

/// Parts gathered into one reply.
#[derive(Default)]
pub struct Joined {
    pub reasoning: String,
    pub content: String,
    pub calls: Vec<(String, String)>,
}

impl Joined {
    pub fn add(&mut self, part: Part) {
        match part {
            Part::Reasoning(r) => self.reasoning.push_str(&r),
            Part::Content(c) => self.content.push_str(&c),
            Part::Call { name, arguments } => self.calls.push((name, arguments)),
            Part::Unfinished { raw, emitted } => {
                let keep = self.reasoning.len().saturating_sub(emitted);
                self.reasoning.truncate(keep);
                self.content.push_str(&raw);
            }
        }
    }
}

#[cfg(test)]
mod tests;
