//! How the cache stores keys or values: f16, or ggml's Q8_0 / Q4_0 blocks of 32.

use half::f16;

use crate::kernels;
use crate::quant::activation::quantize_row_q8_0;
use crate::quant::blocks::{cast_blocks, cast_blocks_mut, BlockQ4_0, BlockQ8_0};
use crate::quant::encode::quantize_row_q4_0_fitted;
use crate::quant::GgmlType;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvType {
    #[default]
    F16,
    /// 8.5 bits per value: half f16's memory and reading time.
    Q8_0,
    /// 4.5 bits per value.
    Q4_0,
}

impl KvType {
    /// Every type, in the order of the C API's KOLIBRI_KV_TYPE_* codes. (A function: cbindgen
    /// would export an associated constant into the C header.)
    pub fn all() -> [KvType; 3] {
        [KvType::F16, KvType::Q8_0, KvType::Q4_0]
    }

    /// The type of C API code `code`.
    pub fn from_code(code: i32) -> Option<KvType> {
        usize::try_from(code)
            .ok()
            .and_then(|i| KvType::all().get(i).copied())
    }

    /// The name llama.cpp's `-ctk` / `-ctv` take.
    pub fn name(self) -> &'static str {
        match self {
            KvType::F16 => "f16",
            KvType::Q8_0 => "q8_0",
            KvType::Q4_0 => "q4_0",
        }
    }

    pub fn parse(name: &str) -> Option<KvType> {
        KvType::all()
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    pub fn ggml(self) -> GgmlType {
        match self {
            KvType::F16 => GgmlType::F16,
            KvType::Q8_0 => GgmlType::Q8_0,
            KvType::Q4_0 => GgmlType::Q4_0,
        }
    }

    /// Values per block: a head's size must be a multiple of it.
    pub fn block_len(self) -> usize {
        self.ggml().block_geometry().0
    }

    /// Bytes of `n` values (`n` a multiple of [`KvType::block_len`]).
    pub fn row_bytes(self, n: usize) -> usize {
        let (len, size) = self.ggml().block_geometry();
        n / len * size
    }

    /// Writes `x` into `out` ([`KvType::row_bytes`] of `x.len()`). Q8_0 rounds as ggml's x86
    /// activation quantizer (what llama.cpp stores a Q8_0 cache with), Q4_0 with fitted scales.
    pub fn encode(self, x: &[f32], out: &mut [u8]) {
        let fits = "KV row bytes fit their values (checked when the cache is made)";
        match self {
            KvType::F16 => {
                use half::slice::HalfFloatSliceExt;
                cast_blocks_mut::<f16>(out)
                    .expect(fits)
                    .convert_from_f32_slice(x)
            }
            KvType::Q8_0 => quantize_row_q8_0(x, cast_blocks_mut::<BlockQ8_0>(out).expect(fits)),
            KvType::Q4_0 => {
                quantize_row_q4_0_fitted(x, cast_blocks_mut::<BlockQ4_0>(out).expect(fits))
            }
        }
    }

    /// Widens rows stored by [`KvType::encode`] (`bytes`, whole rows) into `out`: f16 exactly,
    /// Q8_0 / Q4_0 dequantized, by the backend's kernels.
    pub fn decode(self, bytes: &[u8], out: &mut [f32]) {
        let backend = kernels::backend();
        let whole = "KV rows of whole, aligned blocks";
        match self {
            KvType::F16 => backend.f16_row_to_f32(cast_blocks(bytes).expect(whole), out),
            KvType::Q8_0 => backend.q8_0_to_f32(cast_blocks(bytes).expect(whole), out),
            KvType::Q4_0 => backend.q4_0_to_f32(cast_blocks(bytes).expect(whole), out),
        }
    }
}

impl std::fmt::Display for KvType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
