//! Models: hyperparameters, weights, KV cache and the forward pass.
//!
//! A [`Model`] is immutable once loaded and can be shared across threads (`Arc<Model>`);
//! each [`Context`] holds one sequence's state and is used by one thread at a time.

mod arch;
mod attention;
mod context;
mod error;
mod hparams;
mod kv_cache;
mod load;
mod ops;
mod weights;
mod workers;

use std::path::Path;

pub use arch::{Activation, Arch, RopeStyle};
pub use context::{AbortCallback, BatchToken, Context, ContextParams, Logits};
pub use error::ModelError;
pub use hparams::HParams;
pub use load::LoadOptions;
pub use weights::{LayerWeights, Linear, Weights};

use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;

pub struct Model {
    pub arch: Arch,
    pub hparams: HParams,
    pub weights: Weights,
    pub tokenizer: Tokenizer,
    /// The mapped file the weights point into.
    pub gguf: GgufFile,
}

impl Model {
    /// Maps and validates a GGUF model: architecture, hyperparameters, every tensor's presence,
    /// shape and type, and the tokenizer.
    pub fn load(path: impl AsRef<Path>) -> Result<Model, ModelError> {
        Self::load_with(path, &mut LoadOptions::default())
    }

    /// [`Model::load`] with a choice of mapping, locking and a cancellable progress callback.
    pub fn load_with(path: impl AsRef<Path>, opts: &mut LoadOptions) -> Result<Model, ModelError> {
        Self::from_gguf(load::open_gguf(path.as_ref(), opts)?)
    }

    pub fn from_gguf(gguf: GgufFile) -> Result<Model, ModelError> {
        let arch_name = gguf
            .get_str("general.architecture")
            .ok_or_else(|| ModelError::MissingKey("general.architecture".into()))?;
        let arch = Arch::from_name(arch_name)?;
        let tokenizer =
            Tokenizer::from_gguf(&gguf).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let mut hparams = HParams::from_gguf(&gguf, arch, tokenizer.n_vocab())?;
        if arch == Arch::Gemma3 && hparams.n_layer == 62 {
            // Gemma 3 27B scales queries by 1/sqrt(n_embd/n_head) (query_pre_attn_scalar),
            // which GGUF does not record; llama.cpp keys it on the model size the same way.
            hparams.attn_scale = 1.0 / ((hparams.n_embd / hparams.n_head) as f32).sqrt();
        }
        let weights = Weights::load(&gguf, arch, &hparams)?;
        Ok(Model {
            arch,
            hparams,
            weights,
            tokenizer,
            gguf,
        })
    }

    /// Total number of weight elements (the "parameter count").
    pub fn n_params(&self) -> u64 {
        self.gguf.tensors().iter().map(|t| t.n_elements()).sum()
    }
}
