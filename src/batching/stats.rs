//! Counters a server exports as metrics; updated by the scheduler thread, read by anyone.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct Stats {
    /// Requests accepted into the queue.
    pub requests_submitted: AtomicU64,
    /// Requests refused because the queue was full.
    pub requests_rejected: AtomicU64,
    /// Requests that ran to a finish reason (stop or length).
    pub requests_finished: AtomicU64,
    /// Requests ended early: the client went away or the time limit passed.
    pub requests_cancelled: AtomicU64,
    /// Requests waiting for a free slot.
    pub queue_depth: AtomicU64,
    /// Slots generating or reading a prompt.
    pub slots_busy: AtomicU64,
    /// Prompt tokens evaluated, and prompt tokens found already in a slot's cache.
    pub prompt_tokens: AtomicU64,
    pub prompt_tokens_cached: AtomicU64,
    pub completion_tokens: AtomicU64,
    /// Time spent in forward passes, in microseconds.
    pub busy_micros: AtomicU64,
    /// Forward passes and the tokens they evaluated (their ratio is the mean batch size).
    pub forward_passes: AtomicU64,
    pub forward_tokens: AtomicU64,
    /// Context shifts done for requests that filled their slot.
    pub context_shifts: AtomicU64,
    /// Prompt-lookup speculation: tokens drafted, and those the model agreed with.
    pub drafted_tokens: AtomicU64,
    pub accepted_tokens: AtomicU64,
}

impl Stats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }

    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub(super) fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Relaxed);
    }

    /// Every counter summed over several schedulers (a server's resident models).
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Stats>) -> Stats {
        let total = Stats::default();
        for s in all {
            Self::add(&total.requests_submitted, Self::get(&s.requests_submitted));
            Self::add(&total.requests_rejected, Self::get(&s.requests_rejected));
            Self::add(&total.requests_finished, Self::get(&s.requests_finished));
            Self::add(&total.requests_cancelled, Self::get(&s.requests_cancelled));
            Self::add(&total.queue_depth, Self::get(&s.queue_depth));
            Self::add(&total.slots_busy, Self::get(&s.slots_busy));
            Self::add(&total.prompt_tokens, Self::get(&s.prompt_tokens));
            Self::add(
                &total.prompt_tokens_cached,
                Self::get(&s.prompt_tokens_cached),
            );
            Self::add(&total.completion_tokens, Self::get(&s.completion_tokens));
            Self::add(&total.busy_micros, Self::get(&s.busy_micros));
            Self::add(&total.forward_passes, Self::get(&s.forward_passes));
            Self::add(&total.forward_tokens, Self::get(&s.forward_tokens));
            Self::add(&total.context_shifts, Self::get(&s.context_shifts));
            Self::add(&total.drafted_tokens, Self::get(&s.drafted_tokens));
            Self::add(&total.accepted_tokens, Self::get(&s.accepted_tokens));
        }
        total
    }

    /// Completion tokens per second of forward-pass time (0 before the first pass).
    pub fn completion_tokens_per_second(&self) -> f64 {
        let micros = Self::get(&self.busy_micros);
        if micros == 0 {
            return 0.0;
        }
        Self::get(&self.completion_tokens) as f64 * 1e6 / micros as f64
    }
}
