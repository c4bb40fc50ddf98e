//! Kernels shared by the 32-quant types whose weights unpack to 32 signed bytes and whose
//! activations are Q8_0 (Q4_0, Q5_0, Q8_0): each type's folder gives its unpacking as a trait
//! impl, these generic kernels do the rest.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "aarch64")]
pub mod neon;
