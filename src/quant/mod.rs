//! Quantization formats: ggml block layouts, scalar reference dequantization, and the 8-bit
//! activation quantizers (Q8_0, Q8_K) used for integer dot products.

pub mod activation;
pub mod blocks;
pub mod dequant;
pub mod dequant_k;
pub mod encode;
pub mod types;

pub use blocks::*;
pub use dequant::{dequantize_row, DequantError};
pub use types::{GgmlType, QK_K};
