//! Server-sent events as OpenAI streams them: one `data: {chunk}` per piece of text, a last
//! chunk with the finish reason (and, if asked, a usage chunk), then `data: [DONE]`.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use kolibri::batching::{Event, EventSink, TokenLogprob};
use kolibri::model::Model;
use serde_json::{json, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::logprobs;
use super::routes::{failure_error, finish_reason, usage, ResponseMeta, TOOL_CALLS};
use super::tools::{Piece, ToolStream};

/// Delivers a request's events to its HTTP handler; when the handler is gone (the client
/// disconnected and hyper dropped the response), the scheduler sees a closed sink and frees
/// the slot.
pub struct ChannelSink(pub UnboundedSender<Event>);

impl EventSink for ChannelSink {
    fn send(&mut self, event: Event) -> bool {
        self.0.send(event).is_ok()
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

#[derive(Clone, Copy)]
pub enum Flavor {
    Chat,
    Completion,
}

impl Flavor {
    pub fn id_prefix(self) -> &'static str {
        match self {
            Flavor::Chat => "chatcmpl",
            Flavor::Completion => "cmpl",
        }
    }

    pub fn object(self) -> &'static str {
        match self {
            Flavor::Chat => "chat.completion",
            Flavor::Completion => "text_completion",
        }
    }

    fn chunk_object(self) -> &'static str {
        match self {
            Flavor::Chat => "chat.completion.chunk",
            Flavor::Completion => "text_completion",
        }
    }
}

struct Streamer {
    meta: ResponseMeta,
    rx: UnboundedReceiver<Event>,
    include_usage: bool,
    /// Chunks produced but not yet sent (a finish may produce three).
    queued: Vec<String>,
    done: bool,
    /// With tools: the reply split into text and calls as it streams.
    tools: Option<ToolStream>,
    calls_sent: usize,
    /// With `logprobs`: the model, to spell tokens; the entries of the text not yet sent; and
    /// where that text starts in the completion.
    vocab: Option<Arc<Model>>,
    logprobs: Vec<TokenLogprob>,
    text_offset: usize,
}

impl Streamer {
    fn chunk(&self, choice: Value) -> String {
        let mut c = self
            .meta
            .envelope(self.meta.flavor.chunk_object(), json!([choice]));
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        format!("data: {c}\n\n")
    }

    /// A text chunk's choice, carrying the log-probabilities of its tokens when asked for.
    fn text_choice(&mut self, text: &str, finish: Option<&str>) -> Value {
        let mut choice = self.plain_choice(text, finish);
        if let Some(vocab) = &self.vocab {
            if !self.logprobs.is_empty() || finish.is_none() {
                let entries = std::mem::take(&mut self.logprobs);
                choice["logprobs"] = logprobs::choice_logprobs(
                    self.meta.flavor,
                    &vocab.tokenizer,
                    &entries,
                    &mut self.text_offset,
                );
            }
        }
        choice
    }

    fn plain_choice(&self, text: &str, finish: Option<&str>) -> Value {
        match self.meta.flavor {
            Flavor::Chat => {
                let delta = if finish.is_some() {
                    json!({})
                } else {
                    json!({ "content": text })
                };
                json!({ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish })
            }
            Flavor::Completion => {
                json!({ "index": 0, "text": text, "logprobs": null, "finish_reason": finish })
            }
        }
    }

    /// Queues a chunk per piece: text as content deltas, each call as one `tool_calls` delta.
    fn queue_pieces(&mut self, pieces: Vec<Piece>) {
        for piece in pieces {
            let choice = match piece {
                Piece::Text(t) => self.text_choice(&t, None),
                Piece::Call(call) => {
                    let index = self.calls_sent;
                    self.calls_sent += 1;
                    let call = call.to_json(&self.meta.call_id(index), Some(index));
                    json!({ "index": 0, "delta": { "tool_calls": [call] }, "logprobs": null,
                            "finish_reason": null })
                }
            };
            let chunk = self.chunk(choice);
            self.queued.push(chunk);
        }
    }

    /// The next SSE frames, or `None` when the stream is over.
    async fn next(&mut self) -> Option<String> {
        loop {
            if !self.queued.is_empty() {
                return Some(self.queued.remove(0));
            }
            if self.done {
                return None;
            }
            if let Some(frame) = self.receive().await {
                return frame;
            }
        }
    }

    /// Waits for the next event: `Some(frame)` to send (`Some(None)`: the stream is over), or
    /// `None` when the event only queued chunks, or none (text held back by the tool stream).
    async fn receive(&mut self) -> Option<Option<String>> {
        Some(match self.rx.recv().await {
            Some(Event::Logprobs(entries)) => {
                self.logprobs.extend(entries);
                return None;
            }
            Some(Event::Text(t)) => match self.tools.as_mut().map(|s| s.push(&t)) {
                None => {
                    let choice = self.text_choice(&t, None);
                    Some(self.chunk(choice))
                }
                Some(pieces) => {
                    self.queue_pieces(pieces);
                    return None;
                }
            },
            Some(Event::Done(c)) => {
                self.done = true;
                let mut finish = finish_reason(c.finish);
                if let Some(mut tools) = self.tools.take() {
                    self.queue_pieces(tools.finish());
                    if tools.saw_calls() {
                        finish = TOOL_CALLS;
                    }
                }
                let choice = self.text_choice("", Some(finish));
                let last = self.chunk(choice);
                if self.include_usage {
                    let mut u = self
                        .meta
                        .envelope(self.meta.flavor.chunk_object(), json!([]));
                    u["usage"] = usage(&c);
                    self.queued.push(format!("data: {u}\n\n"));
                }
                self.queued.push("data: [DONE]\n\n".into());
                // Pieces the finish released go first, then the finish chunk.
                self.queued.insert(
                    self.queued.len() - 1 - usize::from(self.include_usage),
                    last,
                );
                Some(self.queued.remove(0))
            }
            Some(Event::Failed(f)) => {
                // Headers are gone already: the error travels as an event, as OpenAI does.
                self.done = true;
                Some(format!("data: {}\n\n", failure_error(&f).body()))
            }
            None => None,
        })
    }
}

pub fn response(
    meta: ResponseMeta,
    rx: UnboundedReceiver<Event>,
    include_usage: bool,
    echo: Option<String>,
    vocab: Option<Arc<Model>>,
) -> Response {
    let mut s = Streamer {
        meta,
        rx,
        include_usage,
        queued: Vec::new(),
        done: false,
        tools: None,
        calls_sent: 0,
        vocab,
        logprobs: Vec::new(),
        text_offset: 0,
    };
    s.tools = s.meta.tools.clone().map(ToolStream::new);
    // The chat stream opens with the assistant's role, before any text arrives.
    if let Flavor::Chat = s.meta.flavor {
        let first = json!({
            "index": 0,
            "delta": { "role": "assistant", "content": "" },
            "logprobs": null,
            "finish_reason": null,
        });
        s.queued.push(s.chunk(first));
    }
    if let Some(text) = echo.filter(|t| !t.is_empty()) {
        let c = s.chunk(s.plain_choice(&text, None));
        s.queued.push(c);
    }
    let body = futures_util::stream::unfold(s, |mut s| async move {
        let frame = s.next().await?;
        Some((Ok::<_, Infallible>(Bytes::from(frame)), s))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}
