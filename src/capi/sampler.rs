//! `kolibri_sampler`: picks the next token from a context's logits.

use super::context::{kolibri_context, no_logits};
use super::exclusive::Exclusive;
use super::guard::{free_boxed, guard, guard_void, handle, into_raw, out_ptr, write};
use super::model::kolibri_model;
use super::params::{init_params, read_params, VersionedParams};
use super::status::*;
use crate::sampling::{Sampler, SamplerParams};

/// Sampling state: parameters, the random generator and the recent tokens the penalties see.
///
/// Thread safety: used by one thread at a time (INVALID_STATE otherwise).
pub struct kolibri_sampler {
    pub(crate) inner: Exclusive<Sampler>,
}

/// How to sample. Initialise with kolibri_sampler_params_init, then change fields. The
/// pipeline: penalties, then (unless greedy) top-k, top-p, min-p, temperature, random draw.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct kolibri_sampler_params {
    /// sizeof(kolibri_sampler_params) as the caller compiled it; set by the init function.
    pub struct_size: usize,
    /// Softmax temperature; <= 0 means greedy (always the highest logit). Default 0.8.
    pub temperature: f32,
    /// Keep only the k most likely tokens; 0 = off. Default 40.
    pub top_k: i32,
    /// Keep the smallest set of tokens whose probability reaches top_p; 1 = off. Default 0.95.
    pub top_p: f32,
    /// Drop tokens less likely than min_p times the most likely one; 0 = off. Default 0.05.
    pub min_p: f32,
    /// Repetition penalty on recent tokens (divides positive logits); 1 = off. Default 1.
    pub repeat_penalty: f32,
    /// OpenAI frequency penalty: subtracts count x value; 0 = off. Default 0.
    pub frequency_penalty: f32,
    /// OpenAI presence penalty: subtracts value once per token seen; 0 = off. Default 0.
    pub presence_penalty: f32,
    /// How many recent tokens the penalties consider; 0 disables penalties. Default 64.
    pub penalty_last_n: i32,
    /// Random seed; the same seed, params and logits give the same tokens. Default fixed.
    pub seed: u64,
}

// SAFETY: repr(C), starts with `struct_size: usize`, has no bool fields.
unsafe impl VersionedParams for kolibri_sampler_params {
    const NAME: &'static str = "kolibri_sampler_params";
    const BOOL_FIELDS: &'static [usize] = &[];
    fn defaults() -> Self {
        let d = SamplerParams::default();
        kolibri_sampler_params {
            struct_size: std::mem::size_of::<Self>(),
            temperature: d.temperature,
            top_k: d.top_k as i32,
            top_p: d.top_p,
            min_p: d.min_p,
            repeat_penalty: d.repeat_penalty,
            frequency_penalty: d.frequency_penalty,
            presence_penalty: d.presence_penalty,
            penalty_last_n: d.penalty_last_n as i32,
            seed: d.seed,
        }
    }
}

/// Fills `params` with the defaults; `struct_size` is `sizeof(kolibri_sampler_params)` as the caller
/// compiled it: exactly that many bytes are written, and `params->struct_size` is set to it.
/// Call it as `kolibri_sampler_params_init(&params, sizeof params)`.
///
/// **Ownership:** writes into the caller's struct; nothing to free.
/// **Errors:** INVALID_ARGUMENT (`params` is NULL, or `struct_size` is smaller than this
/// version of the struct and not the size of an earlier one).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `params` is NULL or writable for `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_params_init(
    params: *mut kolibri_sampler_params,
    struct_size: usize,
) -> kolibri_status {
    // SAFETY: per this function\'s contract.
    guard(|| unsafe { init_params(params, struct_size) })
}

/// Creates a sampler. `params` may be NULL for the defaults.
///
/// **Ownership:** on success `*out_sampler` receives a new sampler the caller frees with
/// kolibri_sampler_free.
/// **Errors:** INVALID_ARGUMENT (NULL `out_sampler`, bad params: negative top_k or
/// penalty_last_n, top_p or min_p outside [0, 1], NaN values, ...).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `params` is NULL or initialised as documented; `out_sampler` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_new(
    params: *const kolibri_sampler_params,
    out_sampler: *mut *mut kolibri_sampler,
) -> kolibri_status {
    guard(|| {
        let out = out_ptr(out_sampler, "out_sampler")?;
        // SAFETY: per this function's contract.
        let p = unsafe { read_params(params) }?;
        let count = |v: i32, name: &str| {
            usize::try_from(v).map_err(|_| Failure::invalid(format!("{name} is negative ({v})")))
        };
        let params = SamplerParams {
            temperature: p.temperature,
            top_k: count(p.top_k, "top_k")?,
            top_p: p.top_p,
            min_p: p.min_p,
            repeat_penalty: p.repeat_penalty,
            frequency_penalty: p.frequency_penalty,
            presence_penalty: p.presence_penalty,
            penalty_last_n: count(p.penalty_last_n, "penalty_last_n")?,
            seed: p.seed,
        };
        let sampler = Sampler::new(params).map_err(|e| Failure::invalid(e.to_string()))?;
        let handle = kolibri_sampler {
            inner: Exclusive::new(sampler),
        };
        // SAFETY: `out` checked above.
        unsafe { write(out, into_raw(handle)) };
        Ok(())
    })
}

/// Frees a sampler. NULL is a no-op.
///
/// **Ownership:** `sampler` is invalid afterwards.
/// **Errors:** none; freeing the same handle twice is undefined behaviour.
/// **Thread safety:** no other thread may be using `sampler`.
///
/// # Safety
/// `sampler` is NULL or a live handle from kolibri_sampler_new, not freed before.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_free(sampler: *mut kolibri_sampler) {
    // SAFETY: per this function's contract.
    guard_void(|| unsafe { free_boxed(sampler) })
}

/// Picks the next token from the logits of the context's last evaluated position, and
/// accepts it (the penalties will see it). Feed the token back with kolibri_context_eval.
///
/// **Ownership:** results go to the caller's outputs; nothing to free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument), INVALID_STATE (the context has no logits
/// yet; the sampler or the context is in use by another thread).
/// **Thread safety:** one thread at a time per sampler and per context.
///
/// # Safety
/// `sampler` and `context` are NULL or live; `out_token` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_sample(
    sampler: *mut kolibri_sampler,
    context: *const kolibri_context,
    out_token: *mut i32,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(sampler.cast_const(), "sampler") }?;
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context, "context") }?;
        let out = out_ptr(out_token, "out_token")?;
        let mut sampler = s.inner.lock("sampler")?;
        let state = c.inner.lock("context")?;
        if state.logits.is_empty() {
            return Err(no_logits());
        }
        let token = sampler.sample(&state.logits);
        sampler.accept(token);
        // SAFETY: `out` checked above.
        unsafe { write(out, token as i32) };
        Ok(())
    })
}

/// Records a token the penalties should count without it having been sampled (the prompt,
/// or a token the host chose itself).
///
/// **Ownership:** nothing is allocated for the caller; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `sampler`), INVALID_TOKEN (negative `token`),
/// INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per sampler.
///
/// # Safety
/// `sampler` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_accept(
    sampler: *mut kolibri_sampler,
    token: i32,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(sampler.cast_const(), "sampler") }?;
        let id = u32::try_from(token).map_err(|_| {
            Failure::new(
                KOLIBRI_STATUS_INVALID_TOKEN,
                format!("token id {token} is negative"),
            )
        })?;
        s.inner.lock("sampler")?.accept(id);
        Ok(())
    })
}

/// Makes the sampler never choose the tokens `model`'s file suppresses
/// (`tokenizer.ggml.suppress_tokens`, which Gemma 4 files carry; llama.cpp's samplers bias them
/// to -inf). Call it once after kolibri_sampler_new for a model's sampler; a model without
/// such tokens clears the set.
///
/// **Ownership:** the sampler keeps a copy of the ids; the model may be freed afterwards.
/// **Errors:** INVALID_ARGUMENT (a NULL argument), INVALID_STATE (the sampler is in use by
/// another thread).
/// **Thread safety:** one thread at a time per sampler; the model may be shared.
///
/// # Safety
/// `sampler` and `model` are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_suppress_model_tokens(
    sampler: *mut kolibri_sampler,
    model: *const kolibri_model,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(sampler.cast_const(), "sampler") }?;
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let suppressed = m.model.tokenizer.suppressed();
        s.inner.lock("sampler")?.suppress(suppressed);
        Ok(())
    })
}

/// Forgets the accepted tokens and restarts the random generator from the seed.
///
/// **Ownership:** nothing is allocated for the caller; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `sampler`), INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per sampler.
///
/// # Safety
/// `sampler` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_reset(sampler: *mut kolibri_sampler) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(sampler.cast_const(), "sampler") }?;
        s.inner.lock("sampler")?.reset();
        Ok(())
    })
}
