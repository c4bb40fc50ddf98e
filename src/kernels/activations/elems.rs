//! The activation formats: which element a weight type's kernels read ([`ActElem`]), and the
//! per-block side data the repacked kernels read besides the quants ([`Q8Side`],
//! [`Q8KSide`]), computed once per quantization rather than once per row group.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::{ActData, QuantizedActivations};
use crate::quant::activation::{quantize_row_q8_0, quantize_row_q8_k};
use crate::quant::blocks::{BlockQ8K, BlockQ8_0};
use crate::quant::types::QK_K;

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
    pub fn block_len(self) -> usize {
        match self {
            ActFormat::Q8_0 => 32,
            ActFormat::Q8K => QK_K,
            _ => 1,
        }
    }

    /// The name `kolibri info` prints.
    pub fn name(self) -> &'static str {
        match self {
            ActFormat::Q8_0 => "q8_0",
            ActFormat::Q8K => "q8_k",
            ActFormat::F16 => "f16",
            ActFormat::BF16 => "bf16",
            ActFormat::F32 => "f32",
        }
    }
}

/// One element (block) of an activation format.
pub(crate) trait ActElem: Copy + Send + Sync + 'static {
    const FORMAT: ActFormat;
    /// What the repacked kernels read per block besides it (`()` where nothing).
    type Side: Copy + Default + Send + Sync + 'static;
    /// These activations' elements, if they are in this format.
    fn of(act: &QuantizedActivations) -> Option<&[Self]>;
    /// Their side data, empty unless the quantizer was asked for it.
    fn sides(act: &QuantizedActivations) -> &[Self::Side];
    /// The side data of every element.
    fn compute_sides(a: &[Self]) -> Vec<Self::Side>;
    /// Elements as stored activations.
    fn wrap(v: Vec<Self>) -> ActData;
    /// `x` in this format by the scalar quantizer (`x.len()` whole blocks; tests and the
    /// self-test).
    fn quantize(x: &[f32]) -> Vec<Self>;
}

/// What the repacked kernels read per Q8_0 activation block besides its quants: the scale
/// widened to f32, and 16 × the quant sum (the offset the unsigned Q5_0 layout subtracts).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Q8Side {
    pub d: f32,
    pub offset16: i32,
}

/// What the K-quant repacked kernels read per Q8_K activation block: the sums of its 8
/// sub-blocks of 32 quants as i16 pairs `(S_2i, S_2i+1)` (each `|S| ≤ 32 · 127`), the operand
/// of the Q4_K mins' `vpmaddwd`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Q8KSide {
    pub min_pairs: [i32; 4],
}

impl ActElem for BlockQ8_0 {
    const FORMAT: ActFormat = ActFormat::Q8_0;
    type Side = Q8Side;
    fn of(act: &QuantizedActivations) -> Option<&[Self]> {
        match &act.data {
            ActData::Q8_0(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<Self>) -> ActData {
        ActData::Q8_0(v)
    }
    fn sides(act: &QuantizedActivations) -> &[Q8Side] {
        &act.block_sides
    }
    fn compute_sides(a: &[Self]) -> Vec<Q8Side> {
        a.iter()
            .map(|y| Q8Side {
                d: y.d.to_f32(),
                offset16: 16 * y.qs.iter().map(|&q| q as i32).sum::<i32>(),
            })
            .collect()
    }
    fn quantize(x: &[f32]) -> Vec<Self> {
        let zero = BlockQ8_0 {
            d: f16::ZERO,
            qs: [0; 32],
        };
        let mut v = vec![zero; x.len() / 32];
        quantize_row_q8_0(x, &mut v);
        v
    }
}

impl ActElem for BlockQ8K {
    const FORMAT: ActFormat = ActFormat::Q8K;
    type Side = Q8KSide;
    fn of(act: &QuantizedActivations) -> Option<&[Self]> {
        match &act.data {
            ActData::Q8K(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<Self>) -> ActData {
        ActData::Q8K(v)
    }
    fn sides(act: &QuantizedActivations) -> &[Q8KSide] {
        &act.k_sides
    }
    fn compute_sides(a: &[Self]) -> Vec<Q8KSide> {
        a.iter()
            .map(|y| {
                let sub = |j: usize| y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32;
                let pair = |i: usize| (sub(2 * i) as u16 as i32) | (sub(2 * i + 1) << 16);
                Q8KSide {
                    min_pairs: [pair(0), pair(1), pair(2), pair(3)],
                }
            })
            .collect()
    }
    fn quantize(x: &[f32]) -> Vec<Self> {
        let zero = BlockQ8K {
            d: 0.0,
            qs: [0; QK_K],
            bsums: [0; QK_K / 16],
        };
        let mut v = vec![zero; x.len() / QK_K];
        quantize_row_q8_k(x, &mut v);
        v
    }
}

/// The float formats: the elements themselves, no side data.
macro_rules! float_elem {
    ($e:ty, $format:ident, |$x:ident| $convert:expr) => {
        impl ActElem for $e {
            const FORMAT: ActFormat = ActFormat::$format;
            type Side = ();
            fn of(act: &QuantizedActivations) -> Option<&[Self]> {
                match &act.data {
                    ActData::$format(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> ActData {
                ActData::$format(v)
            }
            fn sides(_: &QuantizedActivations) -> &[()] {
                &[]
            }
            fn compute_sides(a: &[Self]) -> Vec<()> {
                vec![(); a.len()]
            }
            fn quantize($x: &[f32]) -> Vec<Self> {
                $convert
            }
        }
    };
}

float_elem!(f16, F16, |x| {
    let mut v = vec![f16::ZERO; x.len()];
    v.convert_from_f32_slice(x);
    v
});
float_elem!(bf16, BF16, |x| {
    let mut v = vec![bf16::ZERO; x.len()];
    v.convert_from_f32_slice(x);
    v
});
float_elem!(f32, F32, |x| x.to_vec());
