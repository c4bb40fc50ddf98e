//! The float weight types, F16, BF16 and F32: activations of the same type (like llama.cpp),
//! products in f32, the scalar twin's sums in f64. In place on every path: a dot kernel per
//! token, tiles for batches that widen each weight slice once for all their tokens.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;

use half::{bf16, f16};

use super::{scalar_dense, Dense, WeightType};
use crate::kernels::cpu::CpuPath;
use crate::quant::GgmlType;

/// An element of a float weight type widened to f32 exactly.
pub trait Widen: Copy + Send + Sync + 'static {
    fn widen(self) -> f32;
}

impl Widen for f32 {
    fn widen(self) -> f32 {
        self
    }
}

impl Widen for f16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

impl Widen for bf16 {
    /// The bits shifted into the top half, as the SIMD kernels do (`to_f32` quiets a
    /// signalling NaN).
    fn widen(self) -> f32 {
        f32::from_bits((self.to_bits() as u32) << 16)
    }
}

/// The scalar twin: products in f32, summed in f64 like ggml's generic kernel.
fn dot<E: Widen>(w: &[E], a: &[E]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    w.iter()
        .zip(a)
        .map(|(x, y)| (x.widen() * y.widen()) as f64)
        .sum::<f64>() as f32
}

/// Random weights in -1..1 from random words.
fn random<E>(n: usize, bits: &mut dyn FnMut() -> u64, from: fn(f32) -> E) -> Vec<E> {
    (0..n)
        .map(|_| from((bits() >> 40) as f32 / (1u64 << 23) as f32 - 1.0))
        .collect()
}

/// One float weight type: `$name` over elements `$e`, kernels from each path's module.
macro_rules! float_type {
    ($(#[$doc:meta])* $name:ident, $e:ty, $ty:ident, $from:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl WeightType for $name {
            const TYPE: GgmlType = GgmlType::$ty;
            type Block = $e;
            type Act = $e;
            const BLOCK_LEN: usize = 1;

            fn dot(w: &[$e], a: &[$e]) -> f32 {
                dot(w, a)
            }

            fn dequantize(b: &$e, out: &mut [f32]) {
                out[0] = b.widen();
            }

            fn dense(path: CpuPath) -> &'static Dense<$e, $e> {
                const SCALAR: Dense<$e, $e> = scalar_dense::<$name>();
                match path {
                    #[cfg(target_arch = "x86_64")]
                    CpuPath::Avx2 => &avx2::Kernels::<$e>::DENSE,
                    #[cfg(target_arch = "x86_64")]
                    CpuPath::Avx512 | CpuPath::Amx => &avx512::Kernels::<$e>::DENSE,
                    #[cfg(target_arch = "aarch64")]
                    CpuPath::Neon | CpuPath::Dotprod | CpuPath::I8mm => &neon::Kernels::<$e>::DENSE,
                    _ => &SCALAR,
                }
            }

            fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<$e> {
                random(n, bits, $from)
            }
        }
    };
}

float_type!(
    /// F16 weights × F16 activations.
    F16,
    f16,
    F16,
    f16::from_f32
);
float_type!(
    /// BF16 weights × BF16 activations.
    BF16,
    bf16,
    BF16,
    bf16::from_f32
);
float_type!(
    /// F32 weights × F32 activations.
    F32,
    f32,
    F32,
    |x| x
);
