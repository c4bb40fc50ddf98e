//! LFM2-MoE: LFM2's layers ([`super::lfm2`]) with a mixture of experts as the FFN after the
//! first `leading_dense_block_count` layers: sigmoid gate scores, the experts chosen by score
//! plus a per-expert bias (`exp_probs_b`), their scores renormalised to sum to 1.

use super::lfm2::LFM2_RECIPE;
use super::{no_quirks, Architecture, ExpertWidth, FfnRecipe, Gating, MoeRecipe, Recipe};

pub(super) static LFM2MOE: Architecture = Architecture {
    name: "lfm2moe",
    recipe: Recipe {
        ffn: FfnRecipe::Moe(MoeRecipe {
            gating: Gating::Sigmoid,
            norm_weights: true,
            expert_width: ExpertWidth::ExpertKey,
            shared_expert: false,
            selection_bias: true,
            biases: false,
            beside_dense: false,
        }),
        ..LFM2_RECIPE
    },
    quirks: no_quirks,
};
