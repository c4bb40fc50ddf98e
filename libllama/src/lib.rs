//! libllama.so: the C API of llama.cpp's `llama.h` (at llama.cpp 0c1e57098, the revision
//! llama-cpp-python 0.3.36 binds) over the Kolibri engine, so tools written for llama.cpp
//! load Kolibri in its place.
//!
//! Conventions (one module per llama.h concept, as Kolibri's own C API):
//! - Structs crossing the boundary are in [`types`], laid out as llama.h lays them out;
//!   [`layout`] exports their sizes and offsets for a C test against the real header.
//! - Handles (`llama_model`, `llama_context`, `llama_vocab`, `llama_sampler`) are Rust objects
//!   behind the opaque pointers llama.h declares; a NULL handle is refused with a log line.
//! - No panic crosses into C ([`guard`]): a failure returns llama.h's documented failure
//!   value (NULL, a negative count, false, -1) and says why through the log callback.
//! - Everything llama.h declares is exported; what Kolibri does not do is in [`unsupported`]
//!   and says so once.
//! - Thread safety is llama.h's: a model is shared by any number of contexts and threads; a
//!   context and a sampler are used by one thread at a time.

#![warn(unsafe_op_in_unsafe_fn)]
#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

pub mod types;

mod batch;
mod chat;
mod context;
mod guard;
mod layout;
mod log;
mod memory;
mod misc;
mod model;
mod names;
mod perf;
mod sampler;
mod state;
mod unsupported;
mod vocab;
