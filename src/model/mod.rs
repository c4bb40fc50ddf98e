//! Models: hyperparameters, weights, KV cache and the forward pass.
//!
//! A [`Model`] is immutable once loaded and can be shared across threads (`Arc<Model>`);
//! each [`Context`] holds one sequence's state and is used by one thread at a time.

mod arch;
mod assistant;
mod attention;
pub mod budget;
mod checksum;
mod context;
mod error;
mod hparams;
mod kv_cache;
mod load;
mod ops;
pub mod paging;
mod pooling;
pub mod recurrent;
pub mod repack_cache;
mod scratch;
mod weights;
mod workers;

use std::path::Path;

pub use arch::{
    Activation, Arch, Architecture, FfnRecipe, Gating, MoeRecipe, QkNorm, Recipe, RecurrentMixer,
    RopeStyle,
};
pub use assistant::Assistant;
pub use context::{
    AbortCallback, BatchToken, Context, ContextParams, Logits, MtpNeed, MtpOutput, MtpToken,
};
pub use error::ModelError;
pub use hparams::{HParams, MixerKind, MoeParams};
pub use kv_cache::KvType;
pub use load::{mtp_block_bytes, LoadOptions};
pub use pooling::Pooling;
pub use weights::{
    AttentionWeights, DeltaNetWeights, Experts, Ffn, LayerWeights, Linear, RankHead, SharedExpert,
    ShortConvWeights, TokenMixer, Weights,
};

use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;

pub struct Model {
    /// Set when the weights are paged ([`LoadOptions::paged`]): what the forward pass streams.
    /// First, so it is dropped first: its prefetch thread reads the mappings below.
    pub paging: Option<paging::Paging>,
    pub arch: Arch,
    pub hparams: HParams,
    pub weights: Weights,
    pub tokenizer: Tokenizer,
    /// The mapped file the weights point into.
    pub gguf: GgufFile,
    /// Whether the repacked weights came from the repack cache ([`LoadOptions::repack_cache`]).
    pub repacked_from_cache: bool,
}

impl Model {
    /// Maps and validates a GGUF model: architecture, hyperparameters, every tensor's presence,
    /// shape and type, and the tokenizer.
    pub fn load(path: impl AsRef<Path>) -> Result<Model, ModelError> {
        Self::load_with(path, &mut LoadOptions::default())
    }

    /// For a draft model: its output head in 4 bits ([`Linear::requantize_to_q4_0`]), unless
    /// its weights are paged (streamed from the file). Whether the head changed.
    pub fn requantize_head_for_drafting(&mut self) -> bool {
        self.paging.is_none() && self.weights.output.requantize_to_q4_0(&self.gguf)
    }

    /// [`Model::load`] with a choice of mapping, locking and a cancellable progress callback.
    /// A part of a split model (`NAME-00002-of-00003.gguf`) loads every part.
    pub fn load_with(path: impl AsRef<Path>, opts: &mut LoadOptions) -> Result<Model, ModelError> {
        Self::load_parts_with(&[path.as_ref().to_path_buf()], opts)
    }

    /// [`Model::load_with`] from the parts of a split model named in order, whatever their
    /// names (llama.h's `llama_model_load_from_splits`); one path is as `load_with`.
    pub fn load_parts_with(
        paths: &[std::path::PathBuf],
        opts: &mut LoadOptions,
    ) -> Result<Model, ModelError> {
        let (gguf, read, parts) = load::open_gguf(paths, opts)?;
        let cache = opts
            .repack_cache
            .as_deref()
            .and_then(|dir| repack_cache::RepackCache::new(dir, &parts, gguf.file_bytes()));
        // Progress in file bytes: those read in place, then those repacked, tensor by tensor.
        let len = gguf.size_on_disk().max(1) as f32;
        let (paged, mtp) = (opts.paged, opts.mtp);
        if paged && mtp {
            return Err(ModelError::InvalidArgument(
                "the multi-token-prediction block is read from memory: not with paged weights"
                    .into(),
            ));
        }
        let model = Self::build(gguf, cache.as_ref(), paged, mtp, &mut |repacked| {
            opts.report((read + repacked) as f32 / len)
        })?;
        opts.report(1.0)?;
        Ok(model)
    }

    pub fn from_gguf(gguf: GgufFile) -> Result<Model, ModelError> {
        Self::build(gguf, None, false, false, &mut |_| Ok(()))
    }

    /// `repacked` is told the bytes repacked so far, after each tensor; an error stops the
    /// load.
    fn build(
        gguf: GgufFile,
        cache: Option<&repack_cache::RepackCache>,
        paged: bool,
        mtp: bool,
        repacked: load::RepackProgress,
    ) -> Result<Model, ModelError> {
        let arch_name = gguf
            .get_str("general.architecture")
            .ok_or_else(|| ModelError::MissingKey("general.architecture".into()))?;
        let arch = Architecture::from_name(arch_name)?;
        // The tokenizer (vocabulary maps, BPE merges: 0.1-0.2 s for a 150-260k vocabulary)
        // builds on its own thread while the weights are checked and repacked. Its error, if
        // any, is still the one reported first, as when it was built first.
        let n_vocab = Tokenizer::vocab_len(&gguf);
        let (tokenizer, rest) = std::thread::scope(|s| {
            let tokenizer = s.spawn(|| Tokenizer::from_gguf(&gguf));
            let rest = (|| {
                let mut hparams = HParams::from_gguf(&gguf, arch, n_vocab)?;
                if mtp {
                    if hparams.n_mtp_layers == 0 {
                        return Err(ModelError::InvalidArgument(
                            "this model has no multi-token-prediction block \
                             (nextn_predict_layers)"
                                .into(),
                        ));
                    }
                    hparams.add_mtp_block();
                }
                let loaded = Weights::load(&gguf, arch, &hparams, cache, paged, repacked)?;
                Ok::<_, ModelError>((hparams, loaded))
            })();
            let tokenizer = tokenizer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (tokenizer, rest)
        });
        let tokenizer = tokenizer.map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let (hparams, (weights, repacked_from_cache)) = rest?;
        let paging = paged.then(|| paging::Paging::new(&weights, &gguf));
        // The tokenizer read the merge list from the file's header pages.
        load::release_header(&gguf);
        load::release_freed_heap();
        Ok(Model {
            arch,
            hparams,
            weights,
            tokenizer,
            gguf,
            repacked_from_cache,
            paging,
        })
    }

    /// Total number of weight elements (the "parameter count").
    pub fn n_params(&self) -> u64 {
        self.gguf.tensors().iter().map(|t| t.n_elements()).sum()
    }

    /// Identifies the model file: a checksum of its metadata and tensor index (every name,
    /// type, shape and offset; of each part's, if split), so two quantizations of one model
    /// differ.
    pub fn fingerprint(&self) -> u64 {
        let bytes = self.gguf.file_bytes();
        let headers = self
            .gguf
            .parts()
            .iter()
            .map(|p| checksum::checksum(&bytes[p.header()]));
        headers
            .reduce(|a, b| checksum::checksum(&[a.to_le_bytes(), b.to_le_bytes()].concat()))
            .unwrap_or(0)
    }

    /// The model's name for messages: `general.name`, or its architecture.
    pub fn display_name(&self) -> &str {
        self.gguf.get_str("general.name").unwrap_or(self.arch.name)
    }
}
