//! Memory budgets: the largest context and KV cache type that fit in a number of bytes
//! (`--mem-budget`, or `--fit`: what the machine has available), decided before anything is
//! allocated and said at start-up.
//!
//! What a running model holds: its weights (mapped, or read into memory: the file's size),
//! the KV cache (by formula, for the positions written), and the forward pass's scratch
//! (activations of one batch, the dense FFN in bounded chunks, the logits) plus the
//! tokenizer and the process itself, estimated with a margin.

use super::kv_cache::KvShape;
use super::recurrent;
use super::{HParams, KvType, Model, ModelError};

/// Bytes beside weights, KV and activations: the tokenizer's tables, thread stacks, the binary
/// and the allocator's slack (measured 40-60 MiB on Qwen2.5's 152k vocabulary, rounded up).
const PROCESS_BYTES: u64 = 64 << 20;

/// What to fit.
#[derive(Clone, Debug)]
pub struct BudgetRequest {
    pub budget: u64,
    /// Sequences (server slots), each with the context chosen.
    pub n_seq: usize,
    pub n_batch: usize,
    /// A context the caller fixed (`-c`), or `None` for the largest that fits.
    pub n_ctx: Option<usize>,
    /// Key and value types the caller fixed (`-ctk`/`-ctv`), or `None` to choose.
    pub types: Option<(KvType, KvType)>,
}

/// The choice made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fit {
    pub n_ctx: usize,
    pub type_k: KvType,
    pub type_v: KvType,
    /// The KV cache with every position written.
    pub kv_bytes: u64,
    /// Weights (or, paged, what streaming keeps resident), scratch and process overhead.
    pub fixed_bytes: u64,
    /// Whether the model's weights are paged.
    pub paged: bool,
    /// Whether a draft model's weights and cache are counted too.
    pub with_draft: bool,
}

impl std::fmt::Display for Fit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "context {} tokens, KV cache {}/{} ({} MiB), {} and scratch about {} MiB{}",
            self.n_ctx,
            self.type_k,
            self.type_v,
            self.kv_bytes >> 20,
            if self.paged {
                "weights paged (streamed per layer)"
            } else {
                "weights"
            },
            self.fixed_bytes >> 20,
            if self.with_draft {
                " (the target's and the draft model's)"
            } else {
                ""
            }
        )
    }
}

/// Most bytes the scratch of a usual batch takes (512 tokens; 150k-token vocabularies), for
/// deciding before a model is loaded whether its weights must be paged.
const SCRATCH_BOUND: u64 = 128 << 20;

/// Whether a model file of `file_bytes` must have its weights paged ([`crate::model::paging`])
/// to run within `budget`.
pub fn needs_paging(file_bytes: u64, budget: u64) -> bool {
    file_bytes + SCRATCH_BOUND + PROCESS_BYTES > budget
}

/// The largest context (up to the model's trained one, or the one asked for) and then the
/// most precise KV type (f16, then q8_0; keys and values alike unless fixed) that fit the
/// budget. An error says what does not fit.
pub fn fit(model: &Model, req: &BudgetRequest) -> Result<Fit, ModelError> {
    fit_with_draft(model, None, req)
}

/// [`fit`] for a model and the draft model that speculates for it: both models' weights and
/// scratch, and a KV cache for each of the same positions and types (as `kolibri run` and
/// `serve` make the draft's context), up to the shorter trained context.
pub fn fit_with_draft(
    model: &Model,
    draft: Option<&Model>,
    req: &BudgetRequest,
) -> Result<Fit, ModelError> {
    let hp = &model.hparams;
    let models = || std::iter::once(model).chain(draft);
    // Recurrent states do not grow with the context: fixed, per sequence.
    let fixed: u64 = models()
        .map(|m| {
            let states = recurrent::seq_bytes(&m.hparams) as u64 * req.n_seq as u64;
            resident_weights(m) + scratch_bytes(m, req.n_batch) + states
        })
        .sum();
    let what = match (model.paging.is_some(), draft.is_some()) {
        (true, false) => "paged weights (two layers and the output head)",
        (true, true) => "paged weights (with the draft model's)",
        (false, false) => "weights",
        (false, true) => "weights (with the draft model's)",
    };
    let left = req
        .budget
        .checked_sub(fixed + PROCESS_BYTES)
        .ok_or_else(|| {
            ModelError::OutOfMemory(format!(
                "a budget of {} MiB does not hold the model: its {what} and scratch take about {} \
             MiB, plus {} MiB for the process",
                req.budget >> 20,
                fixed >> 20,
                PROCESS_BYTES >> 20
            ))
        })?;
    let types: Vec<(KvType, KvType)> = match req.types {
        Some(t) => vec![t],
        // Q4_0 only when asked for: it costs some models a lot (Qwen2.5-0.5B's perplexity
        // +12%; llama.cpp's Q4_0 cache takes the 1.5B's from 1.8 to 1200).
        None => vec![(KvType::F16, KvType::F16), (KvType::Q8_0, KvType::Q8_0)],
    };
    let kv_bytes = |n_ctx: usize, (type_k, type_v): (KvType, KvType)| {
        models()
            .map(|m| {
                let shape = KvShape::of(&m.hparams, n_ctx, req.n_seq, type_k, type_v);
                shape.bytes().map_or(u64::MAX, |b| b as u64)
            })
            .fold(0u64, u64::saturating_add)
    };
    let trained = (models().map(|m| m.hparams.n_ctx_train).min()).unwrap_or(hp.n_ctx_train);
    let want = req.n_ctx.unwrap_or(trained).min(trained);
    // Per type, the most positions that fit (KV bytes grow linearly with n_ctx).
    let best = types
        .iter()
        .map(|&t| {
            let per_position = kv_bytes(1, t).max(1);
            let n = (left / per_position).min(want as u64) as usize;
            // Whole 256s when it is not the full context asked for: tidier, and a little slack.
            (
                if n < want && n > 256 {
                    n / 256 * 256
                } else {
                    n
                },
                t,
            )
        })
        .filter(|&(n, _)| n > 0)
        // The largest context; among equal ones the first (most precise) type.
        .fold(
            None,
            |best: Option<(usize, (KvType, KvType))>, c| match best {
                Some(b) if b.0 >= c.0 => Some(b),
                _ => Some(c),
            },
        );
    match best {
        Some((n_ctx, t)) if req.n_ctx.is_none_or(|asked| n_ctx >= asked.min(want)) => Ok(Fit {
            n_ctx,
            type_k: t.0,
            type_v: t.1,
            kv_bytes: kv_bytes(n_ctx, t),
            fixed_bytes: fixed + PROCESS_BYTES,
            paged: model.paging.is_some(),
            with_draft: draft.is_some(),
        }),
        _ => Err(ModelError::OutOfMemory(format!(
            "a budget of {} MiB leaves {} MiB for the KV cache after the weights and scratch: \
             not enough for {} tokens{} with {}",
            req.budget >> 20,
            left >> 20,
            req.n_ctx.map_or(1, |n| n),
            if req.n_seq > 1 {
                format!(" x {} sequences", req.n_seq)
            } else {
                String::new()
            },
            match req.types {
                Some((k, v)) => format!("{k}/{v} keys/values"),
                None => "any KV cache type".into(),
            }
        ))),
    }
}

/// Bytes one position of one sequence takes in the KV cache of `hp`'s layers.
pub fn kv_bytes_per_position(hp: &HParams, (type_k, type_v): (KvType, KvType)) -> usize {
    KvShape::of(hp, 1, 1, type_k, type_v)
        .bytes()
        .unwrap_or(usize::MAX)
}

/// The weights a model keeps in memory: its file (without a multi-token-prediction block not
/// loaded, which is never read), or paged, two layers (one running, one read ahead) and the
/// output head.
fn resident_weights(model: &Model) -> u64 {
    match &model.paging {
        Some(p) => (2 * p.largest_layer_bytes() + p.output_bytes()) as u64,
        None if model.hparams.mtp_block_loaded() => model.gguf.file_bytes().len() as u64,
        None => model.gguf.file_bytes().len() as u64 - super::load::mtp_block_bytes(&model.gguf),
    }
}

/// The forward pass's activation buffers for batches of `n_batch` tokens (see
/// `model::context`): the residual stream, queries, keys, values, attention output and
/// projections, the dense FFN's gate and up rows (at most one chunk), the logits; Gemma 4's
/// per-layer inputs and the two sides of its experts beside a dense FFN.
fn scratch_bytes(model: &Model, n_batch: usize) -> u64 {
    let hp = &model.hparams;
    let beside_dense = model.arch.moe().is_some_and(|m| m.beside_dense) && hp.moe.is_some();
    let heads = hp.widest_heads();
    let per_token = 6 * hp.n_embd
        + heads.q_dim()
        + 2 * heads.k_dim()
        + hp.n_layer * hp.n_embd_per_layer
        + usize::from(beside_dense) * 2 * hp.n_embd;
    let ffn = (n_batch * hp.n_ff * 2 * 4).min(super::context::DENSE_CHUNK_BYTES);
    (n_batch * per_token * 4 + ffn + 2 * hp.n_vocab * 4) as u64
}

/// Memory the system can give without swapping (Linux's MemAvailable), for `--fit`.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A size such as `512M`, `4G`, `1.5GiB`, `300000000` (binary units; `B` optional).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let upper = s.to_ascii_uppercase();
    let digits = upper.trim_end_matches(['B', 'I']);
    let (num, shift) = match digits.chars().last()? {
        'K' => (&digits[..digits.len() - 1], 10),
        'M' => (&digits[..digits.len() - 1], 20),
        'G' => (&digits[..digits.len() - 1], 30),
        'T' => (&digits[..digits.len() - 1], 40),
        c if c.is_ascii_digit() || c == '.' => (digits, 0),
        _ => return None,
    };
    let value: f64 = num.trim().parse().ok()?;
    let bytes = value * (1u64 << shift) as f64;
    (value.is_finite() && value > 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("4g"), Some(4 << 30));
        assert_eq!(parse_bytes("1.5G"), Some(3 << 29));
        assert_eq!(parse_bytes("1000"), Some(1000));
        assert_eq!(parse_bytes("2KB"), Some(2048));
        assert_eq!(parse_bytes("7B"), Some(7));
        for bad in ["", "M", "-1G", "0", "x", "1Q", "nanG", "1e30T"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }
}
