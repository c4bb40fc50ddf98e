//! `/metrics` in Prometheus' text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::batching::Stats;

use super::state::AppState;

pub fn render(app: &AppState) -> String {
    // Over the resident models (an unloaded model's counts leave the totals).
    let engines = app.pool.resident();
    let s = &Stats::sum(engines.iter().map(|e| &**e.scheduler.stats()));
    let n_slots: usize = engines.iter().map(|e| e.scheduler.params().n_slots).sum();
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(out, "# HELP kolibri_{name} {help}");
        let _ = writeln!(out, "# TYPE kolibri_{name} {kind}");
        let _ = writeln!(out, "kolibri_{name} {value}");
    };
    let n = |c: &AtomicU64| c.load(Relaxed) as f64;
    metric(
        "http_requests_total",
        "counter",
        "HTTP requests received.",
        n(&app.http_requests),
    );
    metric(
        "http_client_errors_total",
        "counter",
        "Responses with a 4xx status.",
        n(&app.http_client_errors),
    );
    metric(
        "http_server_errors_total",
        "counter",
        "Responses with a 5xx status.",
        n(&app.http_server_errors),
    );
    metric(
        "connections_refused_total",
        "counter",
        "Connections closed on arrival: the connection cap was reached.",
        n(&app.connections_refused),
    );
    metric(
        "requests_total",
        "counter",
        "Generation requests accepted into the queue.",
        n(&s.requests_submitted),
    );
    metric(
        "requests_rejected_total",
        "counter",
        "Generation requests refused because the queue was full.",
        n(&s.requests_rejected),
    );
    metric(
        "requests_finished_total",
        "counter",
        "Generation requests that finished (stop or length).",
        n(&s.requests_finished),
    );
    metric(
        "requests_cancelled_total",
        "counter",
        "Generation requests ended early (client gone or time limit).",
        n(&s.requests_cancelled),
    );
    metric(
        "queue_depth",
        "gauge",
        "Requests waiting for a slot.",
        n(&s.queue_depth),
    );
    metric(
        "slots_busy",
        "gauge",
        "Slots serving a request.",
        n(&s.slots_busy),
    );
    metric(
        "slots",
        "gauge",
        "Slots (requests served at once).",
        n_slots as f64,
    );
    metric(
        "prompt_tokens_total",
        "counter",
        "Prompt tokens evaluated.",
        n(&s.prompt_tokens),
    );
    metric(
        "prompt_tokens_cached_total",
        "counter",
        "Prompt tokens reused from a slot's cache.",
        n(&s.prompt_tokens_cached),
    );
    metric(
        "completion_tokens_total",
        "counter",
        "Tokens generated.",
        n(&s.completion_tokens),
    );
    metric(
        "completion_tokens_per_second",
        "gauge",
        "Tokens generated per second of forward-pass time since start.",
        s.completion_tokens_per_second(),
    );
    metric(
        "forward_seconds_total",
        "counter",
        "Time spent in forward passes.",
        n(&s.busy_micros) / 1e6,
    );
    metric(
        "forward_passes_total",
        "counter",
        "Forward passes run.",
        n(&s.forward_passes),
    );
    metric(
        "forward_tokens_total",
        "counter",
        "Tokens evaluated by forward passes (divided by passes: the mean batch).",
        n(&s.forward_tokens),
    );
    metric(
        "context_shifts_total",
        "counter",
        "Context shifts done for requests that filled their slot (--context-shift).",
        n(&s.context_shifts),
    );
    metric(
        "drafted_tokens_total",
        "counter",
        "Tokens drafted (--lookup, --draft) and checked by the model.",
        n(&s.drafted_tokens),
    );
    metric(
        "accepted_tokens_total",
        "counter",
        "Drafted tokens the model agreed with (divided by drafted: the acceptance rate).",
        n(&s.accepted_tokens),
    );
    out
}
