//! One line on stderr per request, written when its response ends (a stream's last event, or
//! the client leaving): time, client, method, path, status, duration and, for a generation,
//! prompt, cached and generated tokens, time to first token and tokens/s. As text for people
//! or JSON (`--log-format json`) for log shippers. Never the query string, the headers or the
//! body, where keys and users' text live; `-v` adds the user agent and the body's first bytes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{json, Map, Value};

use super::state::AppState;
use crate::batching::Completion;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct LogOptions {
    pub format: LogFormat,
    /// The user agent and the body's first [`BODY_SHOWN`] bytes too.
    pub verbose: bool,
    /// No request lines (tests that drive the router in process).
    pub off: bool,
}

/// How much of a request body `-v` shows.
const BODY_SHOWN: usize = 2048;

/// The client's address, which the accept loop puts on each request.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub SocketAddr);

/// What the generations of one request did (several with `n` > 1).
#[derive(Debug, Default)]
pub struct Generated {
    count: usize,
    prompt: usize,
    cached: usize,
    generated: usize,
    /// The first choice's time to first token, and the longest choice's time.
    first_token: Option<Duration>,
    total: Duration,
}

impl Generated {
    pub fn add(&mut self, c: &Completion) {
        self.count += 1;
        // Choices share their prompt: counted once.
        if self.count == 1 {
            self.prompt = c.prompt_tokens;
            self.cached = c.cached_tokens;
        }
        self.generated += c.completion_tokens;
        self.first_token.get_or_insert(c.time_to_first_token);
        self.total = self.total.max(c.total_time);
    }
}

tokio::task_local! {
    static GENERATED: Arc<Mutex<Generated>>;
}

/// Where the request being served records its generations, when it is being logged.
pub fn recorder() -> Option<Arc<Mutex<Generated>>> {
    GENERATED.try_with(Arc::clone).ok()
}

/// The middleware: serves the request, then logs it when its response has been sent.
pub async fn log_requests(State(app): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let options = app.log;
    if options.off {
        return next.run(req).await;
    }
    let started = Instant::now();
    let mut line = Map::new();
    line.insert("time".into(), json!(now_utc()));
    let client = req
        .extensions()
        .get::<ClientAddr>()
        .map(|c| c.0.to_string());
    line.insert("client".into(), json!(client.unwrap_or_else(|| "-".into())));
    line.insert("method".into(), json!(req.method().as_str()));
    line.insert("path".into(), json!(req.uri().path()));
    let (req, body) = match options.verbose {
        true => {
            let agent = req.headers().get(header::USER_AGENT);
            let agent = agent.and_then(|a| a.to_str().ok()).unwrap_or("-");
            line.insert("user_agent".into(), json!(agent));
            tap_body(req)
        }
        false => (req, None),
    };
    let generated = Arc::new(Mutex::new(Generated::default()));
    let response = GENERATED.scope(Arc::clone(&generated), next.run(req)).await;
    line.insert("status".into(), json!(response.status().as_u16()));
    let mut entry = Entry {
        line,
        started,
        generated,
        body,
        format: options.format,
        ended: None,
    };
    if !is_stream(&response) {
        drop(entry);
        return response;
    }
    // A stream is logged when it ends, or when the client leaves: the entry goes with the body.
    let ended = Arc::new(AtomicBool::new(false));
    entry.ended = Some(Arc::clone(&ended));
    let end = futures_util::stream::once(async move {
        ended.store(true, Relaxed);
        Ok(Bytes::new())
    });
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().chain(end).map(move |chunk| {
        let _ = &entry;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether the response streams (server-sent events, NDJSON): it outlives its handler.
fn is_stream(response: &Response) -> bool {
    let kind = response.headers().get(header::CONTENT_TYPE);
    let kind = kind.and_then(|k| k.to_str().ok()).unwrap_or("");
    kind.starts_with("text/event-stream") || kind.starts_with("application/x-ndjson")
}

/// The request with its body copied, up to [`BODY_SHOWN`] bytes, as it is read.
fn tap_body(req: Request) -> (Request, Option<Arc<Mutex<Vec<u8>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let copy = Arc::clone(&seen);
    let (parts, body) = req.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        if let (Ok(bytes), Ok(mut copy)) = (&chunk, copy.lock()) {
            let room = BODY_SHOWN.saturating_sub(copy.len());
            copy.extend_from_slice(&bytes[..room.min(bytes.len())]);
        }
        chunk
    });
    (
        Request::from_parts(parts, Body::from_stream(body)),
        Some(seen),
    )
}

/// A request's line, written when dropped: when its response has been sent.
struct Entry {
    line: Map<String, Value>,
    started: Instant,
    generated: Arc<Mutex<Generated>>,
    body: Option<Arc<Mutex<Vec<u8>>>>,
    format: LogFormat,
    /// A stream's end was sent (false: the client left before it).
    ended: Option<Arc<AtomicBool>>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut line = std::mem::take(&mut self.line);
        let ms = self.started.elapsed().as_secs_f64() * 1e3;
        line.insert("duration_ms".into(), json!((ms * 10.0).round() / 10.0));
        if let Ok(g) = self.generated.lock() {
            if g.count > 0 {
                add_generation(&mut line, &g);
            }
        }
        if self.ended.as_ref().is_some_and(|e| !e.load(Relaxed)) {
            line.insert("client_left".into(), json!(true));
        }
        if let Some(body) = self.body.as_ref().and_then(|b| b.lock().ok()) {
            line.insert("body".into(), json!(String::from_utf8_lossy(&body)));
        }
        let text = match self.format {
            LogFormat::Json => Value::Object(line).to_string(),
            LogFormat::Text => text_line(&line),
        };
        eprintln!("{text}");
    }
}

fn add_generation(line: &mut Map<String, Value>, g: &Generated) {
    line.insert("prompt_tokens".into(), json!(g.prompt));
    line.insert("cached_tokens".into(), json!(g.cached));
    line.insert("generated_tokens".into(), json!(g.generated));
    let first = g.first_token.unwrap_or_default();
    line.insert("ttft_ms".into(), json!(first.as_millis() as u64));
    let generating = g.total.saturating_sub(first).as_secs_f64();
    if g.generated > 1 && generating > 0.0 {
        let rate = (g.generated - 1) as f64 / generating;
        line.insert("tokens_per_s".into(), json!((rate * 10.0).round() / 10.0));
    }
}

/// `TIME CLIENT METHOD PATH STATUS DURATION` and the generation's figures as `key=value`.
fn text_line(line: &Map<String, Value>) -> String {
    let field = |k: &str| match line.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "-".into(),
    };
    let mut text = format!(
        "{} {} {} {} {} {}ms",
        field("time"),
        field("client"),
        field("method"),
        field("path"),
        field("status"),
        field("duration_ms")
    );
    for key in [
        "prompt_tokens",
        "cached_tokens",
        "generated_tokens",
        "ttft_ms",
        "tokens_per_s",
        "client_left",
        "user_agent",
        "body",
    ] {
        if let Some(v) = line.get(key) {
            let field = match key {
                "ttft_ms" => format!("ttft={v}ms"),
                "tokens_per_s" => format!("speed={v}t/s"),
                "client_left" => "(the client left before the end)".into(),
                _ => format!("{}={v}", key.trim_end_matches("_tokens")),
            };
            text.push(' ');
            text.push_str(&field);
        }
    }
    text
}

fn now_utc() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = crate::chat::format_utc(now.as_secs(), "%Y-%m-%dT%H:%M:%S");
    format!("{secs}.{:03}Z", now.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_line_has_the_fields_in_order_and_the_figures_named() {
        let mut line = Map::new();
        for (k, v) in [
            ("time", json!("2026-12-07T08:00:00.000Z")),
            ("client", json!("127.0.0.1:5000")),
            ("method", json!("POST")),
            ("path", json!("/v1/chat/completions")),
            ("status", json!(200)),
            ("duration_ms", json!(12.5)),
        ] {
            line.insert(k.into(), v);
        }
        let mut g = Generated::default();
        let c = |prompt, generated, first_ms, total_ms| Completion {
            finish: crate::batching::FinishReason::Stop,
            prompt_tokens: prompt,
            cached_tokens: 4,
            completion_tokens: generated,
            tokens: Vec::new(),
            time_to_first_token: Duration::from_millis(first_ms),
            total_time: Duration::from_millis(total_ms),
        };
        g.add(&c(10, 11, 100, 1100));
        g.add(&c(10, 5, 120, 600));
        add_generation(&mut line, &g);
        assert_eq!(
            text_line(&line),
            "2026-12-07T08:00:00.000Z 127.0.0.1:5000 POST /v1/chat/completions 200 12.5ms \
             prompt=10 cached=4 generated=16 ttft=100ms speed=15.0t/s"
        );
    }
}
