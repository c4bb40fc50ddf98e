//! The compute kernels, arranged by what varies:
//!
//! - [`cpu`]: the instruction-set paths this CPU has, and `KOLIBRI_CPU`.
//! - [`backend`]: one [`Backend`] per path, chosen once at start-up, with every op besides
//!   matmuls (activation quantizers, attention rows, `exp`, SwiGLU, GeGLU) and a self-test
//!   of all of them and of every weight type's kernels against the scalar twins.
//! - [`types`]: one folder per weight type (scalar dot, dequantization, kernels per
//!   instruction set, 8-row repacked layout), listed in [`types::REGISTRY`].
//! - [`plan`]: one [`MatmulPlan`] per weight matrix, fixed at load (in place or repacked,
//!   which kernels), and the drivers that run them in parallel.
//! - [`activations`]: matmul inputs quantized once into the format a weight type reads.
//! - [`packed`], [`simd`], [`ops`]: what the layouts share, per-instruction-set helpers, and
//!   the ops' implementations.

use std::fmt;

/// `[e(0), .., e(N - 1)]` built in the kernel itself. `std::array::from_fn` would call the
/// closure from outside: a closure has the kernel's target features, `from_fn` has not, so it
/// is never inlined (profiled: a call per block and register, 8% of a prompt pass).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! each {
    ($n:expr, $zero:expr, |$k:ident| $e:expr) => {{
        let mut v = [$zero; $n];
        for ($k, slot) in v.iter_mut().enumerate() {
            *slot = $e;
        }
        v
    }};
}

mod activations;
mod backend;
mod cpu;
mod info;
mod ops;
mod packed;
mod plan;
mod simd;
pub mod types;

pub use activations::{ActFormat, ActNeeds, ActSource, Q8KSide, Q8Side, QuantizedActivations};
pub use backend::{backend, Backend};
pub use cpu::{resolve_cpu_path, CpuPath};
pub use info::{cpu_features, system_info};
pub use ops::attend::AttnScore;
pub use ops::f32_gemm::{GemmShape, Strided};
pub use packed::PackedWeights;
pub use plan::{
    from_mapped, matmul, matmul_packed, matmul_packed_with, matmul_with, repack, repacks,
    MatmulPlan, WeightMatrix,
};

use crate::quant::GgmlType;

/// Errors the model can check for at load time (types, shapes) or hit on a malformed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelError {
    /// No dot-product kernel for this weight type.
    UnsupportedType(GgmlType),
    /// Activations were quantized for a different weight type family.
    ActivationFormat { weight: GgmlType, got: ActFormat },
    /// Sizes that do not fit together (message says which).
    Shape(String),
    /// The weight bytes are not aligned for the block type.
    Misaligned(GgmlType),
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::UnsupportedType(t) => write!(f, "no matmul kernel for weight type {t}"),
            KernelError::ActivationFormat { weight, got } => {
                write!(f, "weights of type {weight} cannot use {got:?} activations")
            }
            KernelError::Shape(m) => write!(f, "matmul shape error: {m}"),
            KernelError::Misaligned(t) => write!(f, "{t} weight data is misaligned"),
        }
    }
}

impl std::error::Error for KernelError {}

/// Whether Kolibri multiplies weights of type `ty` (checked at model load).
pub fn supports(ty: GgmlType) -> bool {
    types::kind(ty).is_some()
}

/// How the backend of `path` multiplies weights of type `ty`, in words (for `kolibri info`);
/// `None` if unsupported or the CPU lacks `path`.
pub fn describe_kernel(path: CpuPath, ty: GgmlType) -> Option<String> {
    let kind = types::kind(ty)?;
    let b = Backend::for_path(path)?;
    Some(match kind.layout() {
        Some(layout) if repacks(ty) => layout.describe(b.path()),
        _ => kind.describe_dense(b.path()),
    })
}
