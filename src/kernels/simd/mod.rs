//! Per-instruction-set helpers shared by several weight types' kernels (loads, horizontal sums,
//! nibble and bit unpacking, the dot instructions).

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "aarch64")]
pub mod i8mm;
#[cfg(target_arch = "aarch64")]
pub mod neon;
