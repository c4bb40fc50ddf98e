//! Cache rows as f32, converted a block at a time into a small buffer (never a copy of the
//! cache): f16 widened exactly, Q8_0 / Q4_0 dequantized.

use crate::kernels;
use crate::model::kv_cache::{HeadRows, KvType};
use crate::quant::dequant::dequantize_row;

/// Rows `r` of `h` into `out` (`r.len() * h.dim` floats).
pub(super) fn to_f32(h: &HeadRows, r: std::ops::Range<usize>, out: &mut [f32]) {
    match h.ty {
        KvType::F16 => kernels::backend().f16_row_to_f32(h.f16_rows(r), out),
        ty => dequantize_row(ty.ggml(), h.bytes(r), out).expect("whole blocks of a supported type"),
    }
}
