//! The forward pass's operations besides matmuls, each with its scalar twin beside the SIMD
//! versions: activation quantizers (AVX2 here; the scalar ones in [`crate::quant::activation`]),
//! attention row kernels, `exp`, SwiGLU and GeGLU. Each [`super::Backend`] lists the version it
//! runs.

pub mod attend;
pub mod delta_rows;
pub mod exp;
pub mod f16_rows;
pub mod f32_gemm;
pub mod f32_rows;
pub mod gelu;
pub mod kv_rows;
#[cfg(target_arch = "x86_64")]
pub mod quantize_avx2;
