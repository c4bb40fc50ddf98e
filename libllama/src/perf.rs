//! Performance counters (`llama_perf_*`), kept whatever `no_perf` says (they cost nothing).

use crate::context::llama_context;
use crate::log;
use crate::types::{llama_perf_context_data, llama_perf_sampler_data, llama_sampler};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub struct Perf {
    start: Instant,
    start_ms: f64,
    prompt: Duration,
    generation: Duration,
    n_prompt: i32,
    n_generated: i32,
}

impl Perf {
    pub fn new() -> Perf {
        Perf {
            start: Instant::now(),
            start_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64() * 1e3),
            prompt: Duration::ZERO,
            generation: Duration::ZERO,
            n_prompt: 0,
            n_generated: 0,
        }
    }

    /// One decode of `n` tokens: a single token counts as generation, more as prompt.
    pub fn count_decode(&mut self, n: usize, took: Duration) {
        if n == 1 {
            self.generation += took;
            self.n_generated += 1;
        } else {
            self.prompt += took;
            self.n_prompt += n as i32;
        }
    }

    fn data(&self) -> llama_perf_context_data {
        llama_perf_context_data {
            t_start_ms: self.start_ms,
            t_load_ms: 0.0,
            t_p_eval_ms: self.prompt.as_secs_f64() * 1e3,
            t_eval_ms: self.generation.as_secs_f64() * 1e3,
            n_p_eval: self.n_prompt,
            n_eval: self.n_generated,
            n_reused: 0,
        }
    }
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_perf_context(ctx: *const llama_context) -> llama_perf_context_data {
    // SAFETY: the caller's contract.
    unsafe { ctx.as_ref() }.map_or_else(Default::default, |c| c.perf.data())
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_perf_context_print(ctx: *const llama_context) {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { ctx.as_ref() }) else {
        return;
    };
    let d = c.perf.data();
    let rate = |n: i32, ms: f64| if ms > 0.0 { n as f64 * 1e3 / ms } else { 0.0 };
    log::log(
        crate::types::GGML_LOG_LEVEL_INFO,
        &format!(
            "llama_perf_context_print: prompt eval time = {:.2} ms / {} tokens ({:.2} tokens per second)\n\
             llama_perf_context_print:        eval time = {:.2} ms / {} runs ({:.2} tokens per second)\n\
             llama_perf_context_print:       total time = {:.2} ms",
            d.t_p_eval_ms,
            d.n_p_eval,
            rate(d.n_p_eval, d.t_p_eval_ms),
            d.t_eval_ms,
            d.n_eval,
            rate(d.n_eval, d.t_eval_ms),
            c.perf.start.elapsed().as_secs_f64() * 1e3
        ),
    );
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_perf_context_reset(ctx: *mut llama_context) {
    // SAFETY: the caller's contract.
    if let Some(c) = unsafe { ctx.as_mut() } {
        c.perf = Perf::new();
    }
}

/// # Safety
/// `chain` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler(
    chain: *const llama_sampler,
) -> llama_perf_sampler_data {
    // SAFETY: the caller's contract.
    unsafe { crate::sampler::chain_perf(chain) }.unwrap_or_default()
}

/// # Safety
/// `chain` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler_print(chain: *const llama_sampler) {
    // SAFETY: the caller's contract.
    if let Some(d) = unsafe { crate::sampler::chain_perf(chain) } {
        log::log(
            crate::types::GGML_LOG_LEVEL_INFO,
            &format!(
                "llama_perf_sampler_print:    sampling time = {:.2} ms / {} runs",
                d.t_sample_ms, d.n_sample
            ),
        );
    }
}

/// # Safety
/// `chain` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler_reset(chain: *mut llama_sampler) {
    // SAFETY: the caller's contract.
    unsafe { crate::sampler::chain_perf_reset(chain) };
}
