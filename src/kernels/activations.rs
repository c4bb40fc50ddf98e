//! Matmul inputs quantized once into the format a weight type's kernel reads
//! ([`QuantizedActivations`]), from rows in memory or from rows computed chunk by chunk
//! ([`ActSource::Computed`]): a norm or a gated activation can feed the quantizer directly,
//! without writing its f32 result to a buffer that the quantizer then reads back.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

#[cfg(target_arch = "x86_64")]
use super::{avx2, avx2_quantize, cpu_path, CpuPath};
use super::{interleaved, repacks, KernelError};
use crate::parallel::Disjoint;
use crate::quant::activation::{quantize_row_q8_0, quantize_row_q8_k};
use crate::quant::blocks::{BlockQ8K, BlockQ8_0};
use crate::quant::types::{GgmlType, QK_K};

/// Storage format of quantized activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFormat {
    Q8_0,
    Q8K,
    F16,
    BF16,
    F32,
}

impl ActFormat {
    /// Elements per activation block.
    fn block_len(self) -> usize {
        match self {
            ActFormat::Q8_0 => 32,
            ActFormat::Q8K => QK_K,
            _ => 1,
        }
    }
}

/// The activation format the kernel for weight type `ty` consumes, or `None` if unsupported.
pub fn activation_format(ty: GgmlType) -> Option<ActFormat> {
    use GgmlType::*;
    Some(match ty {
        Q4_0 | Q5_0 | Q8_0 => ActFormat::Q8_0,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K => ActFormat::Q8K,
        F16 => ActFormat::F16,
        BF16 => ActFormat::BF16,
        F32 => ActFormat::F32,
        _ => return None,
    })
}

/// Whether [`super::matmul`] has a kernel for weights of type `ty` (check at model load).
pub fn supports(ty: GgmlType) -> bool {
    activation_format(ty).is_some()
}

pub(super) enum ActData {
    Q8_0(Vec<BlockQ8_0>),
    Q8K(Vec<BlockQ8K>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
}

/// Elements per chunk of an [`ActSource::Computed`] row: a multiple of every activation block
/// (32 and 256 quants), and 4 KiB of f32, so a chunk is still in L1 when it is quantized.
const COMPUTED_CHUNK: usize = 1024;

/// Where [`QuantizedActivations::quantize_from`] reads its `n_tokens` rows of `k` floats.
#[derive(Clone, Copy)]
pub enum ActSource<'a> {
    /// Rows in memory, row-major.
    Rows(&'a [f32]),
    /// Rows computed on demand: `fill(t, c0, out)` writes elements `c0..c0 + out.len()` of row
    /// `t`. Chunks start at multiples of 1024 (`COMPUTED_CHUNK`) and are at most that long;
    /// one thread asks for a row's chunks, in order, and rows may be asked for on several
    /// threads at once.
    Computed(&'a (dyn Fn(usize, usize, &mut [f32]) + Sync)),
}

impl ActSource<'_> {
    /// `f(c0, chunk)` over row `t` (of `k` elements): in one piece for rows in memory, chunk by
    /// chunk for computed ones.
    fn row_chunks(&self, t: usize, k: usize, mut f: impl FnMut(usize, &[f32])) {
        match *self {
            ActSource::Rows(x) => f(0, &x[t * k..(t + 1) * k]),
            ActSource::Computed(fill) => {
                let mut buf = [0f32; COMPUTED_CHUNK];
                for c0 in (0..k).step_by(COMPUTED_CHUNK) {
                    let chunk = &mut buf[..COMPUTED_CHUNK.min(k - c0)];
                    fill(t, c0, chunk);
                    f(c0, chunk);
                }
            }
        }
    }
}

/// Activations of `n_tokens` rows of length `k`, quantized once into the format the weight type
/// needs, so several matmuls reading the same input (Q, K, V; gate, up) share it.
pub struct QuantizedActivations {
    pub(super) data: ActData,
    /// Q8_0 only, where Q5_0 or Q8_0 weights are repacked: each block's
    /// [`interleaved::Q8Side`], shared by every interleaved matmul reading these activations.
    pub(super) block_sides: Vec<interleaved::Q8Side>,
    /// Q8_K only, where K-quant weights are repacked: each block's [`interleaved::Q8KSide`].
    /// (Repacking, and so this, is x86-only.)
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) k_sides: Vec<interleaved::Q8KSide>,
    pub(super) n_tokens: usize,
    pub(super) k: usize,
}

impl QuantizedActivations {
    /// Quantizes `x` (`n_tokens` rows of `k` floats, row-major) for weights of type `for_type`.
    /// Any weight type with the same [`activation_format`] can then use the result.
    pub fn quantize(
        x: &[f32],
        n_tokens: usize,
        k: usize,
        for_type: GgmlType,
    ) -> Result<Self, KernelError> {
        if x.len() != n_tokens * k {
            return Err(KernelError::Shape(format!(
                "activation length {} != {n_tokens} tokens x {k}",
                x.len()
            )));
        }
        Self::quantize_from(ActSource::Rows(x), n_tokens, k, for_type)
    }

    /// [`Self::quantize`] of the rows `src` gives; the same bits as quantizing those rows
    /// from memory.
    pub fn quantize_from(
        src: ActSource,
        n_tokens: usize,
        k: usize,
        for_type: GgmlType,
    ) -> Result<Self, KernelError> {
        let format = activation_format(for_type).ok_or(KernelError::UnsupportedType(for_type))?;
        let bl = format.block_len();
        if !k.is_multiple_of(bl) {
            return Err(KernelError::Shape(format!(
                "row length {k} is not a multiple of {bl} ({format:?} activations)"
            )));
        }
        let len = n_tokens * k;
        // Per-token rows are independent; only split across threads when there are several.
        let rows_par = n_tokens >= 4;
        let (q8_0, q8_k) = quantizers();
        let mut block_sides = Vec::new();
        let mut k_sides = Vec::new();
        let data = match format {
            ActFormat::Q8_0 => {
                let zero = BlockQ8_0 {
                    d: f16::ZERO,
                    qs: [0; 32],
                };
                let mut v = vec![zero; len / 32];
                for_rows(&src, &mut v, k, 32, rows_par, q8_0);
                // Only the interleaved kernels read them.
                if repacks(GgmlType::Q5_0) || repacks(GgmlType::Q8_0) {
                    block_sides = interleaved::block_sides(&v);
                }
                ActData::Q8_0(v)
            }
            ActFormat::Q8K => {
                let zero = BlockQ8K {
                    d: 0.0,
                    qs: [0; QK_K],
                    bsums: [0; QK_K / 16],
                };
                let mut v = vec![zero; len / QK_K];
                for_rows(&src, &mut v, k, QK_K, rows_par, q8_k);
                if repacks(GgmlType::Q4_K) || repacks(GgmlType::Q6_K) {
                    k_sides = interleaved::k_block_sides(&v);
                }
                ActData::Q8K(v)
            }
            ActFormat::F16 => {
                let mut v = vec![f16::ZERO; len];
                convert_rows(&src, &mut v, k, |o, x| o.convert_from_f32_slice(x));
                ActData::F16(v)
            }
            ActFormat::BF16 => {
                let mut v = vec![bf16::ZERO; len];
                convert_rows(&src, &mut v, k, |o, x| o.convert_from_f32_slice(x));
                ActData::BF16(v)
            }
            ActFormat::F32 => {
                let mut v = vec![0f32; len];
                convert_rows(&src, &mut v, k, |o, x| o.copy_from_slice(x));
                ActData::F32(v)
            }
        };
        Ok(QuantizedActivations {
            data,
            block_sides,
            k_sides,
            n_tokens,
            k,
        })
    }

    pub fn format(&self) -> ActFormat {
        match self.data {
            ActData::Q8_0(_) => ActFormat::Q8_0,
            ActData::Q8K(_) => ActFormat::Q8K,
            ActData::F16(_) => ActFormat::F16,
            ActData::BF16(_) => ActFormat::BF16,
            ActData::F32(_) => ActFormat::F32,
        }
    }

    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    pub fn k(&self) -> usize {
        self.k
    }
}

/// Quantizes one row of activations into blocks.
type Quantizer<B> = fn(&[f32], &mut [B]);

/// The Q8_0 and Q8_K quantizers of the dispatched path (each bit-identical to the scalar one).
fn quantizers() -> (Quantizer<BlockQ8_0>, Quantizer<BlockQ8K>) {
    #[cfg(target_arch = "x86_64")]
    if matches!(cpu_path(), CpuPath::Avx2 | CpuPath::Avx512) && avx2::detected() {
        return (
            // SAFETY: AVX2 and FMA were detected.
            |x, out| unsafe { avx2_quantize::quantize_row_q8_0(x, out) },
            // SAFETY: as above.
            |x, out| unsafe { avx2_quantize::quantize_row_q8_k(x, out) },
        );
    }
    (quantize_row_q8_0, quantize_row_q8_k)
}

/// Quantizes every row of `src` into `out` (`k / block_len` blocks per row) with `f`, one
/// chunk at a time: every quantizer works block by block, and chunks hold whole blocks.
fn for_rows<B: Send>(
    src: &ActSource,
    out: &mut [B],
    k: usize,
    block_len: usize,
    parallel: bool,
    f: Quantizer<B>,
) {
    let per_row = k / block_len;
    let row = |t: usize, o: &mut [B]| {
        src.row_chunks(t, k, |c0, x| {
            f(x, &mut o[c0 / block_len..(c0 + x.len()) / block_len])
        })
    };
    if per_row == 0 {
        return;
    }
    let n = out.len() / per_row;
    if parallel {
        let o = Disjoint::new(out);
        crate::parallel::for_each(n, |t| {
            // SAFETY: row t's blocks are `out[t * per_row..][..per_row]`, in bounds (the
            // caller sized `out` for every row) and written by this call only.
            row(t, unsafe { o.slice(t * per_row, per_row) })
        });
    } else {
        out.chunks_mut(per_row)
            .enumerate()
            .for_each(|(t, o)| row(t, o));
    }
}

/// Every row of `src` into `out` (`k` elements per row) through `convert`, on this thread.
fn convert_rows<E>(src: &ActSource, out: &mut [E], k: usize, convert: impl Fn(&mut [E], &[f32])) {
    if k == 0 {
        return;
    }
    for (t, o) in out.chunks_mut(k).enumerate() {
        src.row_chunks(t, k, |c0, x| convert(&mut o[c0..c0 + x.len()], x));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stored value of `a`'s rows, as bits.
    fn bits(a: &QuantizedActivations) -> Vec<u32> {
        match &a.data {
            ActData::Q8_0(b) => b
                .iter()
                .flat_map(|b| {
                    [b.d.to_bits() as u32]
                        .into_iter()
                        .chain(b.qs.map(|q| q as u32))
                })
                .collect(),
            ActData::Q8K(b) => b
                .iter()
                .flat_map(|b| {
                    let qs = b.qs.map(|q| q as u32);
                    let sums = b.bsums.map(|s| s as u32);
                    [b.d.to_bits()].into_iter().chain(qs).chain(sums)
                })
                .collect(),
            ActData::F16(x) => x.iter().map(|v| v.to_bits() as u32).collect(),
            ActData::BF16(x) => x.iter().map(|v| v.to_bits() as u32).collect(),
            ActData::F32(x) => x.iter().map(|v| v.to_bits()).collect(),
        }
    }

    #[test]
    fn computed_rows_quantize_like_rows_in_memory() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 23) as f32 * 6.0 - 3.0
        };
        let types = [
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::F32,
        ];
        // Rows of one block, of whole chunks plus a block, and of several chunks plus a tail.
        for (n, k) in [
            (1, 256),
            (3, COMPUTED_CHUNK + 256),
            (5, 2 * COMPUTED_CHUNK + 768),
            (4, COMPUTED_CHUNK + 32),
        ] {
            let x: Vec<f32> = (0..n * k).map(|_| next()).collect();
            let fill = |t: usize, c0: usize, out: &mut [f32]| {
                assert!(
                    c0.is_multiple_of(COMPUTED_CHUNK)
                        && out.len() <= COMPUTED_CHUNK
                        && c0 + out.len() <= k
                );
                out.copy_from_slice(&x[t * k + c0..][..out.len()]);
            };
            for ty in types {
                if !k.is_multiple_of(activation_format(ty).unwrap().block_len()) {
                    continue;
                }
                let want = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
                let src = ActSource::Computed(&fill);
                let got = QuantizedActivations::quantize_from(src, n, k, ty).unwrap();
                assert_eq!(got.format(), want.format());
                assert_eq!((got.n_tokens, got.k), (n, k));
                assert!(bits(&got) == bits(&want), "{ty:?}, {n} x {k}");
                assert!(got.block_sides == want.block_sides && got.k_sides == want.k_sides);
            }
        }
    }
}
