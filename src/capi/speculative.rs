//! `kolibri_speculator`: speculative decoding over a target context, drafting with a draft
//! context (a small model of the same vocabulary), with the target model's own
//! multi-token-prediction block or its assistant drafter, or by prompt lookup.
//!
//! Each step drafts a few tokens, checks them all in one pass of the target and returns the
//! tokens the target agrees with plus the one it chose next: greedy output is exactly plain
//! decoding's, sampled output keeps the target's distribution.

use std::sync::Arc;

use super::assistant::kolibri_assistant;
use super::context::kolibri_context;
use super::exclusive::Exclusive;
use super::guard::{free_boxed, guard, guard_void, handle, into_raw, out_ptr, write, write_array};
use super::model::checked_token;
use super::params::{init_params, read_params, VersionedParams};
use super::sampler::kolibri_sampler;
use super::status::*;
use crate::model::{Assistant, Context, Model};
use crate::speculative::{Drafter, LookupDrafter, ModelDrafter, MtpDrafter, Speculator};

/// What a speculator has learnt about drafting, and how it drafts.
///
/// Thread safety: used by one thread at a time (INVALID_STATE otherwise), with its contexts
/// and sampler.
pub struct kolibri_speculator {
    inner: Exclusive<SpeculatorState>,
}

struct SpeculatorState {
    speculator: Speculator,
    how: Drafting,
    target: Arc<Model>,
    max_draft: usize,
}

enum Drafting {
    Lookup(LookupDrafter),
    /// A draft context of this model, checked against the target at creation.
    Model {
        model: Arc<Model>,
        p_min: f32,
        n_vocab: usize,
    },
    /// The target model's own block or its assistant (with prompt lookup first, where asked),
    /// drafting on the target context it was created with.
    Mtp(Box<MtpDrafter>),
}

/// How to speculate. Initialise with kolibri_speculator_params_init, then change fields.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct kolibri_speculator_params {
    /// sizeof(kolibri_speculator_params) as the caller compiled it; set by the init function.
    pub struct_size: usize,
    /// Most tokens drafted per step, 1..=32 (fewer are drafted when they do not pay).
    /// Default 16.
    pub max_draft: u32,
    /// A draft model's draft ends at a token it gives less probability than this. Default 0.5.
    pub draft_p_min: f32,
    /// Prompt lookup matches the last 1..=lookup_ngram tokens (1..=16). Default 4.
    pub lookup_ngram: u32,
}

// SAFETY: repr(C), starts with `struct_size: usize`, has no bool fields.
unsafe impl VersionedParams for kolibri_speculator_params {
    const NAME: &'static str = "kolibri_speculator_params";
    const BOOL_FIELDS: &'static [usize] = &[];
    fn defaults() -> Self {
        kolibri_speculator_params {
            struct_size: std::mem::size_of::<Self>(),
            max_draft: 16,
            draft_p_min: 0.5,
            lookup_ngram: 4,
        }
    }
}

/// What speculation achieved so far.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct kolibri_speculator_stats {
    /// Tokens drafted and checked by the target.
    pub drafted: u64,
    /// Of those, the ones the target agreed with.
    pub accepted: u64,
    /// Target forward passes.
    pub target_passes: u64,
    /// Tokens returned by the steps.
    pub generated: u64,
}

/// Fills `params` with the defaults; `struct_size` is `sizeof(kolibri_speculator_params)` as
/// the caller compiled it.
///
/// **Ownership:** writes the caller's struct; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `params`, a size smaller than the first release's).
/// **Thread safety:** any thread.
///
/// # Safety
/// `params` is NULL or writable for `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kolibri_speculator_params_init(
    params: *mut kolibri_speculator_params,
    struct_size: usize,
) -> kolibri_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { init_params(params, struct_size) })
}

/// Creates a speculator for `target`'s sequence. With a `draft` context (NULL for prompt
/// lookup), its model must share the target's vocabulary token by token, be smaller, and the
/// draft context must hold as many positions as the target's. The contexts stay the caller's:
/// pass the same two to every kolibri_speculator_step.
///
/// **Ownership:** `*out_speculator` is the caller's; free it with kolibri_speculator_free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument, a draft that does not fit the target, a
/// param out of range), INVALID_STATE (a context in use by another thread).
/// **Thread safety:** any thread; the contexts must not be in use elsewhere during the call.
///
/// # Safety
/// `target` is NULL or live; `draft` is NULL or live; `params` is NULL or a params struct
/// from kolibri_speculator_params_init; `out_speculator` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_speculator_new(
    target: *const kolibri_context,
    draft: *const kolibri_context,
    params: *const kolibri_speculator_params,
    out_speculator: *mut *mut kolibri_speculator,
) -> kolibri_status {
    guard(|| {
        let out = out_ptr(out_speculator, "out_speculator")?;
        // SAFETY: per this function's contract.
        let t = unsafe { handle(target, "target") }?;
        // SAFETY: per this function's contract.
        let p = unsafe { read_params(params) }?;
        check_params(&p)?;
        let target_state = t.inner.lock("target context")?;
        let max_draft = p.max_draft as usize;
        let (how, speculator) = if draft.is_null() {
            let lookup = LookupDrafter::new(1, p.lookup_ngram as usize);
            let speculator = Speculator::new(&lookup, max_draft);
            (Drafting::Lookup(lookup), speculator)
        } else {
            // SAFETY: per this function's contract (not NULL here).
            let d = unsafe { handle(draft, "draft") }?;
            let mut draft_state = d.inner.lock("draft context")?;
            let model = Arc::clone(draft_state.ctx.model());
            let checked =
                ModelDrafter::new(&target_state.ctx, &mut draft_state.ctx, 0, p.draft_p_min)?;
            let speculator = Speculator::new(&checked, max_draft);
            let how = Drafting::Model {
                n_vocab: checked.n_vocab(),
                model,
                p_min: p.draft_p_min,
            };
            (how, speculator)
        };
        let target = Arc::clone(target_state.ctx.model());
        // SAFETY: `out` checked above.
        unsafe { publish(out, (speculator, how), target, max_draft) };
        Ok(())
    })
}

/// Creates a speculator for `target`'s sequence that drafts with the target model's own
/// multi-token-prediction block (a model loaded with `n_mtp_blocks` 1), and with `lookup`,
/// by prompt lookup first (the block where lookup finds nothing). From now on `target` keeps
/// the hidden states the block reads. Pass NULL as `draft` to kolibri_speculator_step and
/// kolibri_speculator_prepare. `params->draft_p_min` is not used.
///
/// **Ownership:** `*out_speculator` is the caller's; free it with kolibri_speculator_free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument, a model loaded without its block, a param
/// out of range), INVALID_STATE (the context in use by another thread).
/// **Thread safety:** any thread; the context must not be in use elsewhere during the call.
///
/// # Safety
/// `target` is NULL or live; `params` is NULL or a params struct from
/// kolibri_speculator_params_init; `out_speculator` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_speculator_new_mtp(
    target: *const kolibri_context,
    params: *const kolibri_speculator_params,
    lookup: bool,
    out_speculator: *mut *mut kolibri_speculator,
) -> kolibri_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { new_own(target, params, lookup, out_speculator, None) })
}

/// Creates a speculator for `target`'s sequence that drafts with `assistant` (loaded for the
/// target's model by kolibri_assistant_load), and with `lookup`, by prompt lookup first (the
/// assistant where lookup finds nothing). From now on `target` keeps the hidden states the
/// assistant reads. Pass NULL as `draft` to kolibri_speculator_step and
/// kolibri_speculator_prepare. `params->draft_p_min` is not used. The speculator keeps what it
/// needs of `assistant`, which may be freed.
///
/// **Ownership:** `*out_speculator` is the caller's; free it with kolibri_speculator_free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument, an assistant loaded for another model, a
/// param out of range), INVALID_STATE (the context in use by another thread).
/// **Thread safety:** any thread; the context must not be in use elsewhere during the call.
///
/// # Safety
/// `target` and `assistant` are NULL or live; `params` is NULL or a params struct from
/// kolibri_speculator_params_init; `out_speculator` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_speculator_new_assistant(
    target: *const kolibri_context,
    assistant: *const kolibri_assistant,
    params: *const kolibri_speculator_params,
    lookup: bool,
    out_speculator: *mut *mut kolibri_speculator,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let a = unsafe { handle(assistant, "assistant") }?;
        let assistant = Some(Arc::clone(&a.assistant));
        // SAFETY: per this function's contract.
        unsafe { new_own(target, params, lookup, out_speculator, assistant) }
    })
}

/// A speculator drafting with the target model's own drafter: `assistant`, or its block.
///
/// # Safety
/// As kolibri_speculator_new_mtp.
unsafe fn new_own(
    target: *const kolibri_context,
    params: *const kolibri_speculator_params,
    lookup: bool,
    out_speculator: *mut *mut kolibri_speculator,
    assistant: Option<Arc<Assistant>>,
) -> Result<(), Failure> {
    let out = out_ptr(out_speculator, "out_speculator")?;
    // SAFETY: per this function's contract.
    let t = unsafe { handle(target, "target") }?;
    // SAFETY: per this function's contract.
    let p = unsafe { read_params(params) }?;
    check_params(&p)?;
    let mut target_state = t.inner.lock("target context")?;
    let mut drafter = match assistant {
        Some(a) => MtpDrafter::with_assistant(&mut target_state.ctx, a)?,
        None => MtpDrafter::new(&mut target_state.ctx)?,
    };
    if lookup {
        // As beside a draft model, only lookup matches of 3+ tokens beat the model's own.
        drafter = drafter.with_lookup(LookupDrafter::new(3, p.lookup_ngram as usize));
    }
    let max_draft = p.max_draft as usize;
    let speculator = Speculator::new(&drafter, max_draft);
    let target = Arc::clone(target_state.ctx.model());
    let how = Drafting::Mtp(Box::new(drafter));
    // SAFETY: `out` checked above.
    unsafe { publish(out, (speculator, how), target, max_draft) };
    Ok(())
}

/// Writes a new speculator handle to `out`.
///
/// # Safety
/// `out` is writable.
unsafe fn publish(
    out: *mut *mut kolibri_speculator,
    (speculator, how): (Speculator, Drafting),
    target: Arc<Model>,
    max_draft: usize,
) {
    let state = SpeculatorState {
        speculator,
        how,
        target,
        max_draft,
    };
    let handle = kolibri_speculator {
        inner: Exclusive::new(state),
    };
    // SAFETY: per this function's contract.
    unsafe { write(out, into_raw(handle)) };
}

/// Refuses params out of range.
fn check_params(p: &kolibri_speculator_params) -> Result<(), Failure> {
    if !(1..=32).contains(&p.max_draft) {
        return Err(Failure::invalid(format!(
            "max_draft {} is not in 1..=32",
            p.max_draft
        )));
    }
    if !(1..=16).contains(&p.lookup_ngram) {
        return Err(Failure::invalid(format!(
            "lookup_ngram {} is not in 1..=16",
            p.lookup_ngram
        )));
    }
    if !(0.0..=1.0).contains(&p.draft_p_min) {
        return Err(Failure::invalid(format!(
            "draft_p_min {} is not in 0..=1",
            p.draft_p_min
        )));
    }
    Ok(())
}

/// One speculative step after `pending`, the token last sampled (by kolibri_sampler_sample
/// or an earlier step) and not yet evaluated. Drafts, checks the drafts in one pass of
/// `target`, and writes the tokens generated to `out_tokens` (at least one, at most
/// max_draft + 1; `*out_n` receives the count). The last is the new pending token; the others
/// are in the target context now. The sampler accepts each of them (as sampling does).
/// A step stops after an end-of-generation token. Afterwards the target has no logits (its
/// last token is pending): continue with another step, or evaluate the pending token.
///
/// **Ownership:** writes the caller's buffer; nothing to free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument; other contexts than at creation),
/// INVALID_TOKEN, BUFFER_TOO_SMALL (`capacity` below max_draft + 1), CONTEXT_FULL (no room for
/// the pending token), CANCELLED (an abort callback stopped a pass), INVALID_STATE (a handle in
/// use by another thread). On error the contexts and the sampler are as before: the step can
/// be retried.
/// **Thread safety:** one thread at a time per speculator, and its contexts and sampler.
///
/// # Safety
/// `speculator`, `target`, `sampler` are NULL or live; `draft` is NULL or live; `out_tokens`
/// is NULL or writable for `capacity` tokens; `out_n` is NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kolibri_speculator_step(
    speculator: *mut kolibri_speculator,
    target: *const kolibri_context,
    draft: *const kolibri_context,
    sampler: *mut kolibri_sampler,
    pending: i32,
    out_tokens: *mut i32,
    capacity: usize,
    out_n: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(speculator.cast_const(), "speculator") }?;
        // SAFETY: per this function's contract.
        let t = unsafe { handle(target, "target") }?;
        // SAFETY: per this function's contract.
        let sm = unsafe { handle(sampler.cast_const(), "sampler") }?;
        out_ptr(out_n, "out_n")?;
        let mut state = s.inner.lock("speculator")?;
        if capacity < state.max_draft + 1 {
            return Err(Failure::new(
                KOLIBRI_STATUS_BUFFER_TOO_SMALL,
                format!(
                    "out_tokens holds {capacity} tokens; a step may return max_draft + 1 = {}",
                    state.max_draft + 1
                ),
            ));
        }
        // Checked before the step: afterwards its tokens could not be returned.
        if out_tokens.is_null() {
            return Err(Failure::invalid("out_tokens is NULL"));
        }
        let mut target_state = t.inner.lock("target context")?;
        check_target(&state, &target_state.ctx)?;
        let pending = checked_token(pending, state.target.hparams.n_vocab)?;
        let mut sampler = sm.inner.lock("sampler")?;
        let SpeculatorState {
            speculator: spec,
            how,
            ..
        } = &mut *state;
        let tokens = match how {
            Drafting::Lookup(lookup) => {
                spec.step(lookup, &mut target_state.ctx, 0, pending, &mut sampler)?
            }
            Drafting::Mtp(block) => {
                no_draft(draft)?;
                spec.step(
                    &mut **block,
                    &mut target_state.ctx,
                    0,
                    pending,
                    &mut sampler,
                )?
            }
            Drafting::Model {
                model,
                p_min,
                n_vocab,
            } => {
                // SAFETY: per this function's contract.
                unsafe {
                    with_draft(draft, model, |ctx| {
                        let mut drafter = ModelDrafter::checked(ctx, 0, *p_min, *n_vocab);
                        Ok(spec.step(
                            &mut drafter,
                            &mut target_state.ctx,
                            0,
                            pending,
                            &mut sampler,
                        )?)
                    })
                }?
            }
        };
        target_state.logits.clear();
        let tokens: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        // SAFETY: per this function's contract; `capacity >= max_draft + 1 >= tokens.len()`.
        unsafe { write_array(&tokens, out_tokens, capacity, out_n) }
    })
}

/// Brings the draft context up to what `target`'s sequence holds (the prompt just
/// evaluated), so that the draft model reads the prompt when the caller chooses (as prompt
/// processing) and the first step drafts at once. Optional: without it the first step reads
/// the prompt itself. A prompt-lookup speculator has nothing to do. A speculator drafting
/// with the model's own block reads what the last kolibri_context_decode of `target`
/// evaluated: call it after each decode of the prompt (without it, the block drafts from
/// the first step on what it has read, and its drafts are worse until then).
///
/// **Ownership:** nothing to free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument; other contexts than at creation), CANCELLED
/// (an abort callback stopped a pass of the draft), INVALID_STATE (a handle in use by another
/// thread). On error the draft context holds what it held before the failed pass.
/// **Thread safety:** one thread at a time per speculator, and its contexts.
///
/// # Safety
/// `speculator` and `target` are NULL or live; `draft` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kolibri_speculator_prepare(
    speculator: *mut kolibri_speculator,
    target: *const kolibri_context,
    draft: *const kolibri_context,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(speculator.cast_const(), "speculator") }?;
        // SAFETY: per this function's contract.
        let t = unsafe { handle(target, "target") }?;
        let mut state = s.inner.lock("speculator")?;
        let mut target_state = t.inner.lock("target context")?;
        check_target(&state, &target_state.ctx)?;
        if let Drafting::Mtp(block) = &mut state.how {
            no_draft(draft)?;
            return Ok(block.prepare_on_target(&mut target_state.ctx, 0)?);
        }
        let Drafting::Model {
            model,
            p_min,
            n_vocab,
        } = &state.how
        else {
            return Ok(());
        };
        let prompt = target_state.ctx.seq_tokens(0);
        // SAFETY: per this function's contract.
        unsafe {
            with_draft(draft, model, |ctx| {
                Ok(ModelDrafter::checked(ctx, 0, *p_min, *n_vocab).prepare(prompt)?)
            })
        }
    })
}

/// Refuses a draft context for a speculator that drafts without one.
fn no_draft(draft: *const kolibri_context) -> Result<(), Failure> {
    match draft.is_null() {
        true => Ok(()),
        false => Err(Failure::invalid(
            "draft must be NULL: the speculator drafts with the target model's own drafter",
        )),
    }
}

/// Refuses a target context of another model than the one the speculator was created for.
fn check_target(state: &SpeculatorState, target: &Context) -> Result<(), Failure> {
    if !Arc::ptr_eq(target.model(), &state.target) {
        return Err(Failure::invalid(
            "target is not a context of the model the speculator was created for",
        ));
    }
    Ok(())
}

/// `f` over the draft context a draft speculator was created with: checks that `draft` is not
/// NULL and is a context of its draft model, and holds its lock meanwhile.
///
/// # Safety
/// `draft` is NULL or live.
unsafe fn with_draft<R>(
    draft: *const kolibri_context,
    model: &Arc<Model>,
    f: impl FnOnce(&mut Context) -> Result<R, Failure>,
) -> Result<R, Failure> {
    if draft.is_null() {
        return Err(Failure::invalid(
            "draft is NULL but the speculator was created with a draft context",
        ));
    }
    // SAFETY: per this function's contract (not NULL here).
    let d = unsafe { handle(draft, "draft") }?;
    let mut draft_state = d.inner.lock("draft context")?;
    if !Arc::ptr_eq(draft_state.ctx.model(), model) {
        return Err(Failure::invalid(
            "draft is not a context of the draft model the speculator was created with",
        ));
    }
    f(&mut draft_state.ctx)
}

/// What the speculator achieved so far.
///
/// **Ownership:** writes the caller's struct; nothing to free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument), INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per speculator.
///
/// # Safety
/// `speculator` is NULL or live; `out_stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_speculator_get_stats(
    speculator: *const kolibri_speculator,
    out_stats: *mut kolibri_speculator_stats,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(speculator, "speculator") }?;
        let out = out_ptr(out_stats, "out_stats")?;
        let st = s.inner.lock("speculator")?.speculator.stats();
        let stats = kolibri_speculator_stats {
            drafted: st.drafted,
            accepted: st.accepted,
            target_passes: st.target_passes,
            generated: st.generated,
        };
        // SAFETY: checked above.
        unsafe { write(out, stats) };
        Ok(())
    })
}

/// Frees a speculator (its contexts stay the caller's). NULL is a no-op.
///
/// **Ownership:** `speculator` is invalid afterwards.
/// **Errors:** none; freeing the same handle twice is undefined behaviour.
/// **Thread safety:** no other thread may be using `speculator`.
///
/// # Safety
/// `speculator` is NULL or a live handle from kolibri_speculator_new, not freed before.
#[no_mangle]
pub unsafe extern "C" fn kolibri_speculator_free(speculator: *mut kolibri_speculator) {
    // SAFETY: per this function's contract.
    guard_void(|| unsafe { free_boxed(speculator) })
}
