//! Matmul inputs quantized once into the format a weight type's kernel reads
//! ([`QuantizedActivations`]), from rows in memory or from rows computed chunk by chunk
//! ([`ActSource::Computed`]): a norm or a gated activation can feed the quantizer directly,
//! without writing its f32 result to a buffer that the quantizer then reads back.

mod elems;

pub(crate) use elems::ActElem;
pub use elems::{ActFormat, Q8KSide, Q8Side};

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::backend::{backend, Backend};
use super::{types, KernelError};
use crate::parallel::Disjoint;
use crate::quant::blocks::{BlockQ8K, BlockQ8_0};
use crate::quant::types::{GgmlType, QK_K};

pub(crate) enum ActData {
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

/// What a matmul needs of its activations: their format, and whether the repacked kernels'
/// per-block side data should come with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActNeeds {
    pub format: ActFormat,
    pub sides: bool,
}

/// Activations of `n_tokens` rows of length `k`, quantized once into the format the weight type
/// needs, so several matmuls reading the same input (Q, K, V; gate, up) share it.
pub struct QuantizedActivations {
    pub(super) data: ActData,
    /// Q8_0 only, when asked for: each block's [`Q8Side`], shared by every repacked matmul
    /// reading these activations.
    pub(super) block_sides: Vec<Q8Side>,
    /// Q8_K only, when asked for: each block's [`Q8KSide`].
    pub(super) k_sides: Vec<Q8KSide>,
    pub(super) n_tokens: usize,
    pub(super) k: usize,
}

impl QuantizedActivations {
    /// Quantizes `x` (`n_tokens` rows of `k` floats, row-major) for weights of type `for_type`
    /// on the process's backend, side data included. Any weight type with the same activation
    /// format can then use the result.
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
        let kind = types::kind(for_type).ok_or(KernelError::UnsupportedType(for_type))?;
        let needs = ActNeeds {
            format: kind.act_format(),
            sides: true,
        };
        Self::quantize_from(backend(), ActSource::Rows(x), n_tokens, k, needs)
    }

    /// The rows `src` gives (`n_tokens` of `k`) in the format `needs` names, quantized by
    /// `backend`: the same bits as quantizing those rows from memory, on every backend.
    pub fn quantize_from(
        backend: &Backend,
        src: ActSource,
        n_tokens: usize,
        k: usize,
        needs: ActNeeds,
    ) -> Result<Self, KernelError> {
        let format = needs.format;
        let bl = format.block_len();
        if !k.is_multiple_of(bl) {
            return Err(KernelError::Shape(format!(
                "row length {k} is not a multiple of {bl} ({format:?} activations)"
            )));
        }
        let len = n_tokens * k;
        // Per-token rows are independent; only split across threads when there are several.
        let rows_par = n_tokens >= 4;
        let mut block_sides = Vec::new();
        let mut k_sides = Vec::new();
        let data = match format {
            ActFormat::Q8_0 => {
                let zero = BlockQ8_0 {
                    d: f16::ZERO,
                    qs: [0; 32],
                };
                let mut v = vec![zero; len / 32];
                for_rows(&src, &mut v, k, 32, rows_par, |x, o| {
                    backend.quantize_q8_0(x, o)
                });
                if needs.sides {
                    block_sides = BlockQ8_0::compute_sides(&v);
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
                for_rows(&src, &mut v, k, QK_K, rows_par, |x, o| {
                    backend.quantize_q8_k(x, o)
                });
                if needs.sides {
                    k_sides = BlockQ8K::compute_sides(&v);
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

    /// Activations already in their format (the self-tests, which run before a backend is
    /// chosen), with their side data if `sides`.
    pub(crate) fn from_elems<A: ActElem>(
        v: Vec<A>,
        n_tokens: usize,
        k: usize,
        sides: bool,
    ) -> Self {
        let mut act = QuantizedActivations {
            data: A::wrap(v),
            block_sides: Vec::new(),
            k_sides: Vec::new(),
            n_tokens,
            k,
        };
        if sides {
            if let Some(a) = BlockQ8_0::of(&act) {
                act.block_sides = BlockQ8_0::compute_sides(a);
            }
            if let Some(a) = BlockQ8K::of(&act) {
                act.k_sides = BlockQ8K::compute_sides(a);
            }
        }
        act
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

/// Quantizes every row of `src` into `out` (`k / block_len` blocks per row) with `f`, one
/// chunk at a time: every quantizer works block by block, and chunks hold whole blocks.
fn for_rows<B: Send>(
    src: &ActSource,
    out: &mut [B],
    k: usize,
    block_len: usize,
    parallel: bool,
    f: impl Fn(&[f32], &mut [B]) + Sync,
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
                let format = types::kind(ty).unwrap().act_format();
                if !k.is_multiple_of(format.block_len()) {
                    continue;
                }
                let want = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
                let src = ActSource::Computed(&fill);
                let needs = ActNeeds {
                    format,
                    sides: true,
                };
                let got = QuantizedActivations::quantize_from(backend(), src, n, k, needs).unwrap();
                assert_eq!(got.format(), want.format());
                assert_eq!((got.n_tokens, got.k), (n, k));
                assert!(bits(&got) == bits(&want), "{ty:?}, {n} x {k}");
                assert!(got.block_sides == want.block_sides && got.k_sides == want.k_sides);
            }
        }
    }
}
