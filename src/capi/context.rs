//! `kolibri_context`: one sequence's KV cache over a model, and evaluation.

use std::ffi::c_void;
use std::sync::Arc;

use super::exclusive::Exclusive;
use super::guard::{free_boxed, guard, guard_void, handle, into_raw, out_ptr, slice, write};
use super::model::{checked_token, kolibri_model};
use super::params::{init_params, read_params, VersionedParams};
use super::status::*;
use crate::model::{Context, ContextParams, KvType, Logits};

/// A sequence being evaluated: KV cache, worker threads and the last logits.
///
/// Thread safety: a context is used by one thread at a time (any thread, not only its
/// creator). A second thread calling in while another call runs gets INVALID_STATE. Contexts
/// on the same model run concurrently and independently.
pub struct kolibri_context {
    pub(crate) inner: Exclusive<ContextState>,
}

pub(crate) struct ContextState {
    pub ctx: Context,
    /// Logits of the last position evaluated; empty after creation and rewinds.
    pub logits: Vec<f32>,
}

/// Called before each layer of an evaluation; return `true` to stop it (kolibri_context_eval
/// then returns CANCELLED and the context is as before the call). Runs on one of Kolibri's
/// worker threads while the evaluating thread waits; must not throw (C++) or longjmp.
pub type kolibri_abort_callback = Option<unsafe extern "C" fn(user_data: *mut c_void) -> bool>;

/// How to create a context. Initialise with kolibri_context_params_init, then change fields.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct kolibri_context_params {
    /// sizeof(kolibri_context_params) as the caller compiled it; set by the init function.
    pub struct_size: usize,
    /// Positions the context holds. 0 = 4096, or the model's trained context if smaller.
    /// Default 0.
    pub n_ctx: u32,
    /// Worker threads. 0 = the model's n_threads param. Default 0.
    pub n_threads: u32,
    /// Most tokens per forward pass; longer inputs are split. 0 = 512. Default 0.
    pub n_batch: u32,
    /// How the KV cache stores keys: a KOLIBRI_KV_TYPE_* constant. Default KOLIBRI_KV_TYPE_F16.
    /// The quantized types need head sizes that are multiples of 32 (INVALID_ARGUMENT
    /// otherwise). Added in 0.2; callers built against older headers get f16.
    pub type_k: kolibri_kv_type,
    /// How the KV cache stores values, as `type_k`. Default KOLIBRI_KV_TYPE_F16.
    pub type_v: kolibri_kv_type,
}

/// How a KV cache stores keys or values (the C API names types with constants: any int32_t a
/// caller passes is checked).
pub type kolibri_kv_type = i32;
/// 16-bit floats (llama.cpp's default).
pub const KOLIBRI_KV_TYPE_F16: kolibri_kv_type = 0;
/// Q8_0 blocks: 8.5 bits per value, about half of f16's memory.
pub const KOLIBRI_KV_TYPE_Q8_0: kolibri_kv_type = 1;
/// Q4_0 blocks: 4.5 bits per value.
pub const KOLIBRI_KV_TYPE_Q4_0: kolibri_kv_type = 2;

// SAFETY: repr(C), starts with `struct_size: usize`, has no bool fields.
unsafe impl VersionedParams for kolibri_context_params {
    const NAME: &'static str = "kolibri_context_params";
    const BOOL_FIELDS: &'static [usize] = &[];
    fn defaults() -> Self {
        kolibri_context_params {
            struct_size: std::mem::size_of::<Self>(),
            n_ctx: 0,
            n_threads: 0,
            n_batch: 0,
            type_k: KOLIBRI_KV_TYPE_F16,
            type_v: KOLIBRI_KV_TYPE_F16,
        }
    }
}

/// Fills `params` with the defaults; `struct_size` is `sizeof(kolibri_context_params)` as the caller
/// compiled it: exactly that many bytes are written, and `params->struct_size` is set to it.
/// Call it as `kolibri_context_params_init(&params, sizeof params)`.
///
/// **Ownership:** writes into the caller's struct; nothing to free.
/// **Errors:** INVALID_ARGUMENT (`params` is NULL, or `struct_size` is smaller than this
/// version of the struct and not the size of an earlier one).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `params` is NULL or writable for `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_params_init(
    params: *mut kolibri_context_params,
    struct_size: usize,
) -> kolibri_status {
    // SAFETY: per this function\'s contract.
    guard(|| unsafe { init_params(params, struct_size) })
}

/// Creates an empty context on `model`. `params` may be NULL for the defaults.
///
/// **Ownership:** on success `*out_context` receives a new context the caller frees with
/// kolibri_context_free. The context keeps the model's weights alive by itself, so the
/// model handle may be freed first.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `out_context`, bad params, n_ctx above the
/// trained context), OUT_OF_MEMORY (the KV cache cannot be allocated).
/// **Thread safety:** callable from any thread, concurrently on the same model.
///
/// # Safety
/// `model` is NULL or live; `params` is NULL or initialised as documented; `out_context` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_new(
    model: *const kolibri_model,
    params: *const kolibri_context_params,
    out_context: *mut *mut kolibri_context,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let out = out_ptr(out_context, "out_context")?;
        // SAFETY: per this function's contract.
        let p = unsafe { read_params(params) }?;
        let n_ctx_train = m.model.hparams.n_ctx_train;
        let n_ctx = match p.n_ctx {
            0 => n_ctx_train.min(4096),
            n => n as usize,
        };
        let params = ContextParams {
            n_ctx,
            n_seq: 1,
            n_threads: match p.n_threads {
                0 => m.default_threads,
                n => n as usize,
            },
            n_batch: match p.n_batch {
                0 => 512,
                n => n as usize,
            },
            type_k: KvType::from_code(p.type_k).ok_or_else(|| bad_kv_type(p.type_k, "type_k"))?,
            type_v: KvType::from_code(p.type_v).ok_or_else(|| bad_kv_type(p.type_v, "type_v"))?,
        };
        let ctx = Context::new(Arc::clone(&m.model), &params)?;
        let handle = kolibri_context {
            inner: Exclusive::new(ContextState {
                ctx,
                logits: Vec::new(),
            }),
        };
        // SAFETY: `out` checked above.
        unsafe { write(out, into_raw(handle)) };
        Ok(())
    })
}

/// Frees a context and its worker threads. NULL is a no-op.
///
/// **Ownership:** `context` and any logits pointer obtained from it are invalid afterwards.
/// **Errors:** none; freeing the same handle twice is undefined behaviour.
/// **Thread safety:** no other thread may be using `context`.
///
/// # Safety
/// `context` is NULL or a live handle from kolibri_context_new, not freed before.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_free(context: *mut kolibri_context) {
    // SAFETY: per this function's contract.
    guard_void(|| unsafe { free_boxed(context) })
}

/// Evaluates `n_tokens` tokens at the context's next positions (a whole prompt at once, or
/// one generated token at a time) and keeps the logits of the last one for
/// kolibri_context_logits and kolibri_sampler_sample.
///
/// On any failure the context holds exactly what it held before the call. How tokens are
/// split into calls (and into n_batch chunks) does not change the result beyond float
/// rounding: batched kernels sum in another order, which moves logits slightly.
///
/// **Ownership:** `tokens` is only read during the call.
/// **Errors:** INVALID_ARGUMENT (NULL `context`, NULL `tokens` or `n_tokens` 0),
/// INVALID_TOKEN (an id out of range; nothing is evaluated), CONTEXT_FULL (the tokens do not
/// fit; rewind or use a larger context), CANCELLED (the abort callback stopped it),
/// INVALID_STATE (the context is in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `tokens` is NULL or readable for `n_tokens` ids.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_eval(
    context: *mut kolibri_context,
    tokens: *const i32,
    n_tokens: usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context.cast_const(), "context") }?;
        // SAFETY: per this function's contract.
        let tokens = unsafe { slice(tokens, n_tokens, "tokens") }?;
        if tokens.is_empty() {
            return Err(Failure::invalid("n_tokens is 0: nothing to evaluate"));
        }
        let mut state = c.inner.lock("context")?;
        let n_vocab = state.ctx.model().hparams.n_vocab;
        let ids = tokens
            .iter()
            .map(|&t| checked_token(t, n_vocab))
            .collect::<Result<Vec<u32>, _>>()?;
        let logits = state.ctx.eval(&ids, Logits::Last)?;
        state.logits = logits;
        Ok(())
    })
}

/// The logits (unnormalised scores, one per vocabulary entry) of the last position evaluated.
///
/// **Ownership:** `*out_logits` points into the context: valid until the next eval, rewind
/// or free of this context; do not free it.
/// **Errors:** INVALID_ARGUMENT (a NULL argument), INVALID_STATE (nothing evaluated since the
/// context was created or rewound; the context is in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `out_logits` and `out_n_vocab` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_logits(
    context: *const kolibri_context,
    out_logits: *mut *const f32,
    out_n_vocab: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context, "context") }?;
        let out_logits = out_ptr(out_logits, "out_logits")?;
        let out_n = out_ptr(out_n_vocab, "out_n_vocab")?;
        let state = c.inner.lock("context")?;
        if state.logits.is_empty() {
            return Err(no_logits());
        }
        // SAFETY: both checked above.
        unsafe {
            write(out_logits, state.logits.as_ptr());
            write(out_n, state.logits.len());
        }
        Ok(())
    })
}

pub(crate) fn no_logits() -> Failure {
    Failure::new(
        KOLIBRI_STATUS_INVALID_STATE,
        "no logits: nothing was evaluated since the context was created or rewound",
    )
}

/// Keeps the first `n_keep` tokens and forgets the rest, so evaluation continues at position
/// `n_keep` (regenerate a reply, drop a turn, reuse a shared prompt prefix). The logits are
/// cleared until the next eval. On a model with recurrent layers (LFM2) a state more than 40
/// tokens back may no longer be known: the context then keeps the longest prefix whose state
/// is (see `kolibri_context_size`), and the caller evaluates the rest again.
///
/// **Ownership:** nothing is allocated or freed; logits pointers from this context become invalid.
/// **Errors:** INVALID_ARGUMENT (NULL `context`, `n_keep` above the tokens held),
/// INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_rewind(
    context: *mut kolibri_context,
    n_keep: usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context.cast_const(), "context") }?;
        let mut state = c.inner.lock("context")?;
        let held = state.ctx.n_past();
        if n_keep > held {
            return Err(Failure::invalid(format!(
                "cannot keep {n_keep} tokens: the context holds {held}"
            )));
        }
        state.ctx.truncate(n_keep);
        state.logits.clear();
        Ok(())
    })
}

/// The number of tokens the context holds (`*out_n_tokens`) and the most it can hold
/// (`*out_n_ctx`). Either output may be NULL if not wanted.
///
/// **Ownership:** results go to the caller's outputs; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `context`), INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; the outputs are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_size(
    context: *const kolibri_context,
    out_n_tokens: *mut usize,
    out_n_ctx: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context, "context") }?;
        let state = c.inner.lock("context")?;
        // SAFETY: non-NULL outputs are writable per this function's contract.
        unsafe {
            if !out_n_tokens.is_null() {
                write(out_n_tokens, state.ctx.n_past());
            }
            if !out_n_ctx.is_null() {
                write(out_n_ctx, state.ctx.n_ctx());
            }
        }
        Ok(())
    })
}

/// Sets (or with a NULL `callback` removes) the abort callback asked before each layer of
/// every later evaluation. `user_data` is passed to it unchanged.
///
/// **Ownership:** the context keeps `callback` and `user_data` until replaced or freed; Kolibri
/// never frees `user_data`.
/// **Errors:** INVALID_ARGUMENT (NULL `context`), INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per context; the callback itself runs on a Kolibri
/// worker thread and must be safe to call from there.
///
/// # Safety
/// `context` is NULL or live; `callback`, if set, stays callable with `user_data` until it is
/// replaced or the context is freed.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_set_abort_callback(
    context: *mut kolibri_context,
    callback: kolibri_abort_callback,
    user_data: *mut c_void,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context.cast_const(), "context") }?;
        let mut state = c.inner.lock("context")?;
        let abort = callback.map(|cb| {
            let user_data = SendPtr(user_data);
            Box::new(move || {
                let user_data = &user_data;
                // SAFETY: the caller keeps the callback and its data valid (see above).
                unsafe { cb(user_data.0) }
            }) as crate::model::AbortCallback
        });
        state.ctx.set_abort(abort);
        Ok(())
    })
}

/// The caller's opaque pointer, moved to a worker thread for the abort callback.
struct SendPtr(*mut c_void);
// SAFETY: Kolibri never dereferences it; the C caller vouches for its use on worker threads.
unsafe impl Send for SendPtr {}

fn bad_kv_type(t: kolibri_kv_type, field: &str) -> Failure {
    Failure::invalid(format!(
        "params.{field} {t} is not a KOLIBRI_KV_TYPE_* value"
    ))
}
