//! One served model: its scheduler (slots, queue, compute threads), chat template, name,
//! grammar compiler and embedding context. A server holds one, or several loaded on demand
//! ([`super::pool`]).

use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Instant;

use crate::batching::Scheduler;
use crate::chat::{ChatTemplate, ChatTemplateError};
use crate::grammar::{Constraint, ConstraintSpec, GrammarCompiler, GrammarError};
use crate::tokenizer::TokenId;
use std::sync::atomic::Ordering::Relaxed;

pub struct Engine {
    pub scheduler: Scheduler,
    pub template: Result<ChatTemplate, ChatTemplateError>,
    /// The name the model is served under (`--alias`, the file name without `.gguf`, or its
    /// name in the model store).
    pub model_id: String,
    /// Unix time it was loaded (the model's `created`).
    pub loaded: u64,
    /// Built on the first structured-output request (it walks the whole vocabulary once).
    grammar: OnceLock<Result<GrammarCompiler, GrammarError>>,
    /// The context embeddings are computed in.
    pub embedder: super::embeddings::Embedder,
    /// When a request last asked for it (idle unloading goes by this).
    last_used: Mutex<Instant>,
}

impl Engine {
    pub fn new(
        scheduler: Scheduler,
        template: Result<ChatTemplate, ChatTemplateError>,
        model_id: String,
    ) -> Engine {
        Engine {
            scheduler,
            template,
            model_id,
            loaded: super::state::unix_now(),
            grammar: OnceLock::new(),
            embedder: Default::default(),
            last_used: Mutex::new(Instant::now()),
        }
    }

    /// Compiles a request's constraint against the model's vocabulary. Slow for a large
    /// schema, so callers run it off the async threads.
    pub fn compile_constraint(&self, spec: &ConstraintSpec) -> Result<Constraint, GrammarError> {
        let compiler = self
            .grammar
            .get_or_init(|| GrammarCompiler::new(&self.scheduler.model().tokenizer));
        compiler.as_ref().map_err(Clone::clone)?.compile(spec)
    }

    /// User text for embedding: the model's BOS, no special-token parsing.
    pub fn tokenize_plain(&self, text: &str) -> Vec<TokenId> {
        self.scheduler.model().tokenizer.encode(text, true, false)
    }

    /// Tokenizes a prompt the way llama.cpp's server does: special tokens parsed, the model's
    /// BOS added unless the text (a rendered chat template, say) already starts with it.
    pub fn tokenize(&self, text: &str) -> Vec<TokenId> {
        let tok = &self.scheduler.model().tokenizer;
        let mut ids = tok.encode(text, true, true);
        if let Some(bos) = tok.bos() {
            if ids.len() >= 2 && ids[0] == bos && ids[1] == bos {
                ids.remove(0);
            }
        }
        ids
    }

    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    pub fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Nothing queued and no slot busy.
    pub fn is_idle(&self) -> bool {
        let stats = self.scheduler.stats();
        stats.queue_depth.load(Relaxed) == 0 && stats.slots_busy.load(Relaxed) == 0
    }
}
