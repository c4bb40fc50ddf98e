//! Server-sent events as OpenAI streams them: one `data: {chunk}` per piece of text, a last
//! chunk with the finish reason (and, if asked, a usage chunk), then `data: [DONE]`.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::{Arc, Mutex};

use crate::batching::{Completion, Event, EventSink, TokenLogprob};
use crate::model::Model;
use serde_json::{json, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::logprobs;
use super::reply::{ReplyPiece, ReplySplitter};
use super::request_log::Generated;
use super::routes::{failure_error, finish_reason, usage, ResponseMeta, TOOL_CALLS};

/// Delivers a request's events to its HTTP handler; when the handler is gone (the client
/// disconnected and hyper dropped the response), the scheduler sees a closed sink and frees
/// the slot.
/// A finished request's figures also go to the request log's record, when it has one.
pub struct ChannelSink {
    pub events: UnboundedSender<Event>,
    pub log: Option<Arc<Mutex<Generated>>>,
}

impl EventSink for ChannelSink {
    fn send(&mut self, event: Event) -> bool {
        if let (Event::Done(c), Some(log)) = (&event, &self.log) {
            if let Ok(mut log) = log.lock() {
                log.add(c);
            }
        }
        self.events.send(event).is_ok()
    }
    fn is_closed(&self) -> bool {
        self.events.is_closed()
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

/// One choice's state while it streams.
struct ChoiceStream {
    /// Chat: the reply split into thinking, text and calls as it streams.
    splitter: Option<ReplySplitter>,
    calls_sent: usize,
    /// With `logprobs`: the entries of the text not yet sent, and where that text starts.
    logprobs: Vec<TokenLogprob>,
    text_offset: usize,
    done: bool,
}

struct Streamer {
    meta: ResponseMeta,
    /// Every choice's events, tagged with its index.
    rx: UnboundedReceiver<(usize, Event)>,
    include_usage: bool,
    /// Chunks produced but not yet sent (a finish may produce several).
    queued: Vec<String>,
    done: bool,
    choices: Vec<ChoiceStream>,
    /// With `logprobs`: the model, to spell tokens.
    vocab: Option<Arc<Model>>,
    /// The usage summed over the choices that finished (the prompt counted once).
    usage: Option<Completion>,
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
    fn text_choice(&mut self, index: usize, text: &str, finish: Option<&str>) -> Value {
        let mut choice = self.plain_choice(index, text, finish);
        if let Some(vocab) = &self.vocab {
            let state = &mut self.choices[index];
            if !state.logprobs.is_empty() || finish.is_none() {
                let entries = std::mem::take(&mut state.logprobs);
                choice["logprobs"] = logprobs::choice_logprobs(
                    self.meta.flavor,
                    &vocab.tokenizer,
                    &entries,
                    &mut state.text_offset,
                );
            }
        }
        choice
    }

    fn plain_choice(&self, index: usize, text: &str, finish: Option<&str>) -> Value {
        match self.meta.flavor {
            Flavor::Chat => {
                let delta = if finish.is_some() {
                    json!({})
                } else {
                    json!({ "content": text })
                };
                json!({ "index": index, "delta": delta, "logprobs": null,
                        "finish_reason": finish })
            }
            Flavor::Completion => {
                json!({ "index": index, "text": text, "logprobs": null, "finish_reason": finish })
            }
        }
    }

    /// Queues a chunk per piece: thinking as `reasoning_content` deltas, text as content
    /// deltas, each call as one `tool_calls` delta.
    fn queue_pieces(&mut self, index: usize, pieces: Vec<ReplyPiece>) {
        for piece in pieces {
            let choice = match piece {
                ReplyPiece::Retract(_) => continue,
                ReplyPiece::Reasoning(r) => {
                    json!({ "index": index, "delta": { "reasoning_content": r },
                            "logprobs": null, "finish_reason": null })
                }
                ReplyPiece::Text(t) => self.text_choice(index, &t, None),
                ReplyPiece::Call(call) => {
                    let state = &mut self.choices[index];
                    let n = state.calls_sent;
                    state.calls_sent += 1;
                    let id = format!("{}_{index}", self.meta.call_id(n));
                    let call = call.to_json(&id, Some(n));
                    json!({ "index": index, "delta": { "tool_calls": [call] }, "logprobs": null,
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
            if !self.receive().await {
                return None;
            }
        }
    }

    /// Turns the next event into queued chunks; `false` when the events ended early.
    async fn receive(&mut self) -> bool {
        let Some((index, event)) = self.rx.recv().await else {
            return false;
        };
        match event {
            Event::Logprobs(entries) => self.choices[index].logprobs.extend(entries),
            Event::Text(t) => match self.choices[index].splitter.as_mut().map(|s| s.push(&t)) {
                None => {
                    let choice = self.text_choice(index, &t, None);
                    let chunk = self.chunk(choice);
                    self.queued.push(chunk);
                }
                Some(pieces) => self.queue_pieces(index, pieces),
            },
            Event::Done(c) => self.finish_choice(index, c),
            Event::Failed(f) => {
                // Headers are gone already: the error travels as an event, as OpenAI does.
                self.done = true;
                self.queued
                    .push(format!("data: {}\n\n", failure_error(&f).body()));
            }
        }
        true
    }

    /// A choice's last pieces and finish chunk; after the last choice, the usage and `[DONE]`.
    fn finish_choice(&mut self, index: usize, c: Completion) {
        let mut finish = finish_reason(c.finish);
        if let Some(mut splitter) = self.choices[index].splitter.take() {
            self.queue_pieces(index, splitter.finish());
            if splitter.saw_calls() {
                finish = TOOL_CALLS;
            }
        }
        let choice = self.text_choice(index, "", Some(finish));
        let chunk = self.chunk(choice);
        self.queued.push(chunk);
        self.choices[index].done = true;
        self.usage = Some(match self.usage.take() {
            None => c,
            Some(mut sum) => {
                sum.completion_tokens += c.completion_tokens;
                sum
            }
        });
        if self.choices.iter().all(|c| c.done) {
            self.done = true;
            if let (true, Some(total)) = (self.include_usage, &self.usage) {
                let mut u = self
                    .meta
                    .envelope(self.meta.flavor.chunk_object(), json!([]));
                u["usage"] = usage(total);
                self.queued.push(format!("data: {u}\n\n"));
            }
            self.queued.push("data: [DONE]\n\n".into());
        }
    }
}

/// One receiver of every choice's events, each tagged with its choice's index. A forwarder
/// stops when the client is gone, so the scheduler sees the choice's sink close.
pub fn merge(receivers: Vec<UnboundedReceiver<Event>>) -> UnboundedReceiver<(usize, Event)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for (index, mut choice) in receivers.into_iter().enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = choice.recv() => {
                        let Some(e) = event else { return };
                        if tx.send((index, e)).is_err() {
                            return;
                        }
                    }
                    _ = tx.closed() => return,
                }
            }
        });
    }
    rx
}

pub fn response(
    meta: ResponseMeta,
    receivers: Vec<UnboundedReceiver<Event>>,
    include_usage: bool,
    echo: Option<String>,
    vocab: Option<Arc<Model>>,
) -> Response {
    let choices = (0..receivers.len())
        .map(|_| ChoiceStream {
            splitter: matches!(meta.flavor, Flavor::Chat).then(|| ReplySplitter::new(&meta.format)),
            calls_sent: 0,
            logprobs: Vec::new(),
            text_offset: 0,
            done: false,
        })
        .collect();
    let mut s = Streamer {
        meta,
        rx: merge(receivers),
        include_usage,
        queued: Vec::new(),
        done: false,
        choices,
        vocab,
        usage: None,
    };
    for index in 0..s.choices.len() {
        // The chat stream opens with the assistant's role, before any text arrives.
        if let Flavor::Chat = s.meta.flavor {
            let first = json!({
                "index": index,
                "delta": { "role": "assistant", "content": "" },
                "logprobs": null,
                "finish_reason": null,
            });
            s.queued.push(s.chunk(first));
        }
        if let Some(text) = echo.as_deref().filter(|t| !t.is_empty()) {
            let c = s.chunk(s.plain_choice(index, text, None));
            s.queued.push(c);
        }
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
