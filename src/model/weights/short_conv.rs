//! A short-convolution layer's tensors (LFM2): the input projection to the gates `b`, `c` and
//! the input `x`, the depthwise causal kernel, and the output projection.

use super::tensors::Loader;
use super::Linear;
use crate::model::error::ModelError;
use crate::model::hparams::HParams;

pub struct ShortConvWeights {
    /// [3*n_embd, n_embd]: rows `b`, then `c`, then `x`.
    pub in_proj: Linear,
    /// [n_embd][kernel]: channel `ch`'s taps at `ch*kernel..`, oldest position first.
    pub kernel: Vec<f32>,
    /// [n_embd, n_embd]
    pub out_proj: Linear,
}

impl ShortConvWeights {
    pub(super) fn load(
        l: &Loader,
        hp: &HParams,
        il: usize,
    ) -> Result<ShortConvWeights, ModelError> {
        let n = |s: &str| format!("blk.{il}.shortconv.{s}");
        let e = hp.n_embd;
        Ok(ShortConvWeights {
            in_proj: l.linear(&n("in_proj.weight"), e, 3 * e)?,
            kernel: l.small_matrix(&n("conv.weight"), hp.conv_kernel, e)?,
            out_proj: l.linear(&n("out_proj.weight"), e, e)?,
        })
    }
}
