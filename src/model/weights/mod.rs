//! Weight tensors located in the mapped file, checked for name, shape and type at load time.
//!
//! Matrices stay in their quantized blocks inside the mapping; only the small norm vectors and
//! biases are copied out as f32.

mod assistant;
mod attention;
mod delta_net;
mod layer;
mod linear;
mod mtp;
mod per_layer;
mod rank_head;
mod short_conv;
mod tensors;

pub use assistant::AssistantProjections;
pub use attention::AttentionWeights;
pub use delta_net::DeltaNetWeights;
pub use layer::{DenseBeside, Experts, Ffn, LayerWeights, SharedExpert, TokenMixer};
pub use linear::Linear;
pub use mtp::MtpWeights;
pub use per_layer::{PerLayerEmbeddings, PerLayerInput};
pub use rank_head::RankHead;
pub use short_conv::ShortConvWeights;

use super::arch::{Arch, SwaRope};
use super::error::ModelError;
use super::hparams::HParams;
use super::load::{release_pages, RepackProgress};
use super::repack_cache::{RepackCache, Wanted};
use crate::gguf::GgufFile;
use crate::kernels::{MatmulPlan, PackedWeights};
use linear::repack_reporting;
use tensors::Loader;

pub struct Weights {
    /// [n_vocab, n_embd], looked up row by row.
    pub token_embd: Linear,
    pub layers: Vec<LayerWeights>,
    /// [n_embd]
    pub output_norm: Vec<f32>,
    /// [n_vocab, n_embd]; the token embedding when the model ties them.
    pub output: Linear,
    pub rope_factors: RopeFactors,
    /// Per-layer inputs (Gemma 4 E2B/E4B).
    pub per_layer: Option<PerLayerEmbeddings>,
    /// A reranker's scoring head (rank pooling).
    pub rank_head: Option<RankHead>,
    /// The multi-token-prediction block, when asked for and the file has one.
    pub mtp: Option<MtpWeights>,
}

/// Per-dimension RoPE frequency divisors, [rope_dims / 2] each.
#[derive(Clone, Debug, Default)]
pub struct RopeFactors {
    /// For every context (`rope_freqs`; Llama 3.1+).
    pub always: Option<Vec<f32>>,
    /// LongRoPE (Phi-3): for contexts longer than the original training context, and for the
    /// others.
    pub long: Option<Vec<f32>>,
    pub short: Option<Vec<f32>>,
}

impl RopeFactors {
    /// The divisors a context of `n_ctx` positions uses, as llama.cpp chooses them.
    pub fn for_context(&self, n_ctx: usize, n_ctx_orig: usize) -> Option<&[f32]> {
        let scaled = if n_ctx > n_ctx_orig {
            &self.long
        } else {
            &self.short
        };
        self.always.as_ref().or(scaled.as_ref()).map(Vec::as_slice)
    }
}

impl Weights {
    /// Layer `il`'s weights: a trunk layer, or at `n_layer` the multi-token-prediction block.
    pub fn layer(&self, il: usize) -> &LayerWeights {
        match (self.layers.get(il), &self.mtp) {
            (Some(l), _) => l,
            (None, Some(mtp)) if il == self.layers.len() => &mtp.block,
            _ => panic!("layer {il} of {}", self.layers.len()),
        }
    }

    /// Every matrix the forward pass multiplies by: the per-layer input projection (Gemma 4),
    /// the layers' in order, then the output head.
    pub fn matrices(&self) -> Vec<&Linear> {
        let per_layer = self.per_layer.as_ref().map(|p| &p.model_proj);
        let layers = self.layers.iter().flat_map(LayerWeights::matrices);
        per_layer
            .into_iter()
            .chain(layers)
            .chain([&self.output])
            .collect()
    }

    /// Locates and checks every tensor and repacks those with an interleaved layout, telling
    /// `progress` the bytes repacked after each tensor. With a `cache`, the repacked matrices
    /// come from it when it holds them (then the second value is true), and are written to it
    /// otherwise. `paged` weights stay file-backed: repacked copies come only from the cache,
    /// and without one every matrix is read in place.
    pub fn load(
        gguf: &GgufFile,
        arch: Arch,
        hp: &HParams,
        cache: Option<&RepackCache>,
        paged: bool,
        progress: RepackProgress,
    ) -> Result<(Weights, bool), ModelError> {
        let l = Loader { gguf };
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let token_embd = l.linear("token_embd.weight", e, v)?;
        if !crate::quant::dequant::is_supported(token_embd.ty) {
            return Err(ModelError::UnsupportedTensorType {
                tensor: token_embd.name,
                ty: token_embd.ty,
            });
        }
        let layers = (0..hp.n_layer)
            .map(|il| LayerWeights::load(&l, arch, hp, il))
            .collect::<Result<Vec<_>, _>>()?;
        let mut output = match l.linear_opt("output.weight", e, v)? {
            Some(o) => o,
            None => token_embd.clone(),
        };
        let tied = output.start == token_embd.start;
        // One tensor at a time (each repacks in parallel chunks); progress and cancellation
        // go through the loading thread between tensors. A tied output head is the token
        // embedding: repacked once, shared, and looked up from the repacked copy (an embedding
        // that is only looked up stays in the file). It goes last: by then the layers' file
        // pages (some faulted in beside the prefaulted tensors) are released, so the biggest
        // matrix never has both copies resident with them.
        let (mut token_embd, mut layers) = (token_embd, layers);
        let mut per_layer = PerLayerEmbeddings::load(&l, hp)?;
        let rank_head = RankHead::load(&l, arch.name, e)?;
        let mut mtp = match hp.mtp_block_loaded() {
            true => Some(MtpWeights::load(&l, arch, hp)?),
            false => None,
        };
        let mut targets: Vec<&mut Linear> = (per_layer.as_mut().map(|p| &mut p.model_proj))
            .into_iter()
            .chain(layers.iter_mut().flat_map(LayerWeights::matrices_mut))
            .collect();
        targets.push(if tied { &mut token_embd } else { &mut output });
        targets.retain(|l| MatmulPlan::would_repack(l.ty, l.k));
        let names: Vec<String> = targets.iter().map(|l| l.name.clone()).collect();
        let wanted: Vec<Wanted> = targets
            .iter()
            .zip(&names)
            .map(|(l, name)| Wanted {
                name,
                ty: l.ty,
                rows: l.rows,
                k: l.k,
            })
            .collect();
        // Nothing to repack (an architecture without interleaved kernels): no cache file.
        let cache = cache.filter(|_| !wanted.is_empty());
        if cache.is_some() {
            // Prefaulting the in-place tensors maps whole page-cache folios around them, most
            // of them these tensors' file pages (gemma: 67 MB). Dropped before the cached copy
            // is mapped, so the peak holds one copy; a miss re-reads them from the page cache.
            for lin in &targets {
                release_pages(lin.matrix(gguf).data);
            }
        }
        let cached = cache.and_then(|c| c.load(&wanted, paged));
        let from_cache = cached.is_some();
        if let Some(mats) = cached {
            for (lin, m) in targets.iter_mut().zip(mats) {
                lin.use_packed(m);
            }
            progress(targets.iter().map(|l| l.len).sum())?;
        } else if paged {
            // Paged weights must stay file-backed: without a cached repack, read in place.
            progress(targets.iter().map(|l| l.len).sum())?;
        } else {
            let mut done = 0;
            for lin in targets.iter_mut() {
                if repack_reporting(lin, gguf, done, progress)? {
                    done += lin.len;
                }
            }
            if let Some(c) = cache {
                let mats: Vec<&dyn PackedWeights> = targets
                    .iter()
                    .filter_map(|l| l.packed().map(|p| &**p))
                    .collect();
                if mats.len() == wanted.len() {
                    // A cache that cannot be written only costs the next load its speed.
                    let _ = c.store(&wanted, &mats);
                }
            }
        }
        let mut done: usize = targets.iter().map(|l| l.len).sum();
        drop(targets);
        if let Some(block) = mtp.as_mut().filter(|_| !paged) {
            // Repacked here, never cached: the cache holds one layout per file, the one
            // without the block (loaded only when asked for).
            for lin in block.matrices_mut() {
                let repacks = MatmulPlan::would_repack(lin.ty, lin.k);
                if repacks && repack_reporting(lin, gguf, done, progress)? {
                    done += lin.len;
                }
            }
        }
        if tied {
            output = token_embd.clone();
        }
        let rope_factors = RopeFactors {
            always: l.vector_opt("rope_freqs.weight", hp.rope_dims / 2)?,
            long: l.vector_opt("rope_factors_long.weight", hp.rope_dims / 2)?,
            short: l.vector_opt("rope_factors_short.weight", hp.rope_dims / 2)?,
        };
        // Sliding layers that take the global layers' factors must rotate as many dimensions.
        let swa_takes_factors =
            (arch.recipe.sliding_window).is_some_and(|s| s.rope == SwaRope::Global);
        let has_factors = rope_factors.always.is_some() || rope_factors.long.is_some();
        if swa_takes_factors && has_factors && hp.rope_dims_swa != hp.rope_dims {
            return Err(ModelError::BadHyperparameter {
                key: format!("{}.rope.dimension_count_swa", arch.name),
                reason: format!(
                    "{} beside {} with RoPE factors for the latter",
                    hp.rope_dims_swa, hp.rope_dims
                ),
            });
        }
        let weights = Weights {
            output_norm: l.vector(arch.recipe.output_norm, e)?,
            output,
            token_embd,
            layers,
            rope_factors,
            per_layer,
            rank_head,
            mtp,
        };
        Ok((weights, from_cache))
    }
}
