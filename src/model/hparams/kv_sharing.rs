//! Which KV cache layer each layer reads. Every attention layer stores its own keys and values,
//! except the last `shared` layers of a model with KV sharing (Gemma 4): those read the cache
//! of the last earlier layer of their kind (sliding or global) that stores its own, and cost no
//! cache memory. (Hugging Face's rule. llama.cpp reads the last storing layer for a global
//! layer and the one before it for a sliding one: the same on the released layer patterns,
//! which end their storing layers with a sliding then a global layer.)

use super::{HParams, MixerKind};

/// The layers that store keys and values (in order: the cache's layers), and per layer the
/// cache layer it reads. `shared` past the attention layers, or a shared layer with no earlier
/// layer of its kind to read, is an error (the reason).
pub(super) fn assign(
    hp: &HParams,
    shared: usize,
) -> Result<(Vec<usize>, Vec<Option<usize>>), String> {
    let n = hp.n_layer;
    if shared >= n {
        return Err(format!(
            "{shared} shared layers of {n}: none would store keys"
        ));
    }
    let first_shared = n - shared;
    let attends = |il: usize| hp.mixers[il] == MixerKind::Attention;
    let storing: Vec<usize> = (0..first_shared).filter(|&il| attends(il)).collect();
    let mut reads = vec![None; n];
    for (kl, &il) in storing.iter().enumerate() {
        reads[il] = Some(kl);
    }
    for (il, read) in reads.iter_mut().enumerate().skip(first_shared) {
        if !attends(il) {
            continue;
        }
        let kind = hp.swa_layers[il];
        let source = (storing.iter().enumerate().rev())
            .find(|&(_, &src)| hp.swa_layers[src] == kind)
            .map(|(kl, _)| kl)
            .ok_or_else(|| {
                let kind = if kind { "sliding" } else { "global" };
                format!(
                    "layer {il} shares the KV cache of a {kind} layer, and none before it has one"
                )
            })?;
        let (mine, theirs) = (hp.heads[il], hp.heads[storing[source]]);
        if (mine.n_head_kv, mine.head_dim_k, mine.head_dim_v)
            != (theirs.n_head_kv, theirs.head_dim_k, theirs.head_dim_v)
        {
            let heads = |h: super::HeadShape| {
                format!(
                    "{} KV heads of {}/{}",
                    h.n_head_kv, h.head_dim_k, h.head_dim_v
                )
            };
            return Err(format!(
                "layer {il} ({}) reads the KV cache of layer {} ({})",
                heads(mine),
                storing[source],
                heads(theirs)
            ));
        }
        *read = Some(source);
    }
    Ok((storing, reads))
}
