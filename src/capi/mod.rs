//! The C ABI: everything `include/kolibri.h` declares (generated from this module by
//! cbindgen; `tests/c_header.rs` fails when the committed header drifts).
//!
//! One file per C concept: [`status`] (status codes), [`guard`] (panic catching, last error,
//! pointer checks, buffer conventions), [`library`] (version, system info), [`model`],
//! [`text`] (tokenize / detokenize), [`chat`] (chat templates), [`context`] (evaluation),
//! [`state`] (saving and loading a context), [`sampler`], [`constraint`] (structured output
//! on a sampler), [`speculative`] (speculative decoding), [`assistant`] (a drafter loaded for
//! a model). Conventions every function follows (also in the header's preamble):
//! - Fallible functions return `kolibri_status`; details of a failure are in the thread's
//!   `kolibri_last_error()`. Outputs are written only on success (BUFFER_TOO_SMALL writes
//!   just the size needed).
//! - No panic crosses the boundary: each export runs in [`guard::guard`].
//! - Handles are opaque, created by `*_new`/`*_load` and released by `*_free` (NULL is a
//!   no-op). Whatever Kolibri allocates, Kolibri frees; callers only ever pass their own
//!   buffers.
//! - Params are passed by pointer, each struct starting with `struct_size`.

// Types keep their C names (kolibri_model, ...), as the header spells them.
#![allow(non_camel_case_types)]

pub mod assistant;
pub mod chat;
pub mod constraint;
pub mod context;
mod exclusive;
pub mod guard;
pub mod library;
pub mod model;
mod params;
pub mod sampler;
pub mod speculative;
pub mod state;
pub mod status;
pub mod text;

pub use status::kolibri_status;

#[cfg(test)]
mod tests;
