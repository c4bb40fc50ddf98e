//! Structured output: a constraint on what a `kolibri_sampler` may return (a JSON schema, a
//! GBNF or Lark grammar, a regular expression).

use std::ffi::c_char;

#[cfg(feature = "grammar")]
use super::guard::{c_str, FfiResult};
use super::guard::{guard, handle};
use super::model::kolibri_model;
use super::sampler::kolibri_sampler;
use super::status::*;

/// What the text of a constraint is: one of the `KOLIBRI_CONSTRAINT_*` values.
pub type kolibri_constraint_kind = i32;

/// Any JSON object; the text is ignored (may be NULL).
pub const KOLIBRI_CONSTRAINT_JSON_OBJECT: kolibri_constraint_kind = 0;
/// A JSON Schema, as JSON text.
pub const KOLIBRI_CONSTRAINT_JSON_SCHEMA: kolibri_constraint_kind = 1;
/// A grammar in llama.cpp's GBNF (`root ::= ...`).
pub const KOLIBRI_CONSTRAINT_GBNF: kolibri_constraint_kind = 2;
/// A grammar in llguidance's Lark dialect (`start: ...`).
pub const KOLIBRI_CONSTRAINT_LARK: kolibri_constraint_kind = 3;
/// A regular expression the whole output matches.
pub const KOLIBRI_CONSTRAINT_REGEX: kolibri_constraint_kind = 4;

/// Constrains the tokens `sampler` returns from now on to text that `text` (of the given
/// `kind`) allows, for `model`'s vocabulary: each kolibri_sampler_sample then draws only
/// among tokens that keep the output valid, and an end-of-generation token only where the
/// output is complete (once it is, nothing else). Replaces any earlier constraint. The first
/// call per model walks its vocabulary (tens of milliseconds).
///
/// **Ownership:** `text` is read during the call only; nothing to free.
/// **Errors:** INVALID_ARGUMENT (a NULL handle, an unknown `kind`, `text` NULL or not UTF-8,
/// or an invalid schema, grammar or expression: `kolibri_last_error()` says where and why),
/// UNSUPPORTED (built without the `grammar` feature), INVALID_STATE (the sampler is in use).
/// **Thread safety:** one thread at a time per sampler; the model may be shared.
///
/// # Safety
/// `sampler` and `model` are NULL or live; `text` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_set_constraint(
    sampler: *mut kolibri_sampler,
    model: *const kolibri_model,
    kind: kolibri_constraint_kind,
    text: *const c_char,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(sampler.cast_const(), "sampler") }?;
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        #[cfg(feature = "grammar")]
        {
            use crate::grammar::ConstraintSpec;
            let text = || -> FfiResult<String> {
                // SAFETY: per this function's contract.
                unsafe { c_str(text, "text") }.map(str::to_owned)
            };
            let spec = match kind {
                KOLIBRI_CONSTRAINT_JSON_OBJECT => ConstraintSpec::JsonObject,
                KOLIBRI_CONSTRAINT_JSON_SCHEMA => ConstraintSpec::JsonSchema(text()?),
                KOLIBRI_CONSTRAINT_GBNF => ConstraintSpec::Gbnf(text()?),
                KOLIBRI_CONSTRAINT_LARK => ConstraintSpec::Lark(text()?),
                KOLIBRI_CONSTRAINT_REGEX => ConstraintSpec::Regex(text()?),
                other => return Err(Failure::invalid(format!("unknown constraint kind {other}"))),
            };
            let constraint = m
                .grammar()?
                .compile(&spec)
                .map_err(|e| Failure::invalid(e.to_string()))?;
            s.inner.lock("sampler")?.set_constraint(Some(constraint));
            Ok(())
        }
        #[cfg(not(feature = "grammar"))]
        {
            let _ = (s, m, kind, text);
            Err(Failure::new(
                KOLIBRI_STATUS_UNSUPPORTED,
                "this library was built without constrained sampling (feature \"grammar\")",
            ))
        }
    })
}

/// Lifts the sampler's constraint, if any.
///
/// **Ownership:** nothing is allocated for the caller; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `sampler`), INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per sampler.
///
/// # Safety
/// `sampler` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kolibri_sampler_clear_constraint(
    sampler: *mut kolibri_sampler,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let s = unsafe { handle(sampler.cast_const(), "sampler") }?;
        let _sampler = s.inner.lock("sampler")?;
        #[cfg(feature = "grammar")]
        {
            let mut sampler = _sampler;
            sampler.set_constraint(None);
        }
        Ok(())
    })
}
