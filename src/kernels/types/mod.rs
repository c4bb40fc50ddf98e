//! Weight types, one folder each: the scalar dot (the reference every kernel of the type is
//! tested against), dequantization, the kernels per instruction set, and the 8-row repacked
//! layout where the type has one, all behind [`WeightType`]. [`REGISTRY`] lists the types;
//! dispatch, the self-test and `kolibri info` loop over it. Adding a type is a folder here and
//! a line in [`REGISTRY`] (its ggml block struct and reference dequantization live in
//! [`crate::quant`], which the GGUF code shares).

mod codebook4;
mod entry;
pub mod float;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod mxfp4;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
mod q8_family;

pub use entry::Kind;
pub(crate) use entry::{compare, test_bits};

use super::activations::ActElem;
use super::cpu::CpuPath;
use super::packed::LayoutKind;
use crate::quant::blocks::Block;
use crate::quant::GgmlType;

/// `dot(w, a)` over whole blocks: one weight row with one token's activations.
pub type DotFn<W, A> = unsafe fn(&[W], &[A]) -> f32;

/// Dot products of `R` weight rows with `T` activation rows: `out[r][t]`.
pub type TileFn<W, A, const R: usize, const T: usize> =
    unsafe fn([&[W]; R], [&[A]; T]) -> [[f32; T]; R];

/// Tokens of a tile call (8 measured faster than 4 on every tiled AVX2 type); tiles of 4 and
/// 2 tokens take the token tails, the dot kernel a last single token.
pub(crate) const TILE_TOKENS: usize = 8;

/// A type's tile kernels of `R` rows: results match its dot kernel per (row, token) up to f32
/// rounding.
pub struct Tiles<W: 'static, A: 'static, const R: usize> {
    pub mm: TileFn<W, A, R, TILE_TOKENS>,
    pub mm4: TileFn<W, A, R, 4>,
    pub mm2: TileFn<W, A, R, 2>,
}

/// A type's tile kernels on one path, by weight rows per call.
pub enum TileSet<W: 'static, A: 'static> {
    None,
    /// One row per call (AVX2).
    Rows1(Tiles<W, A, 1>),
    /// Two rows per call (i8mm: `smmla` multiplies two rows by two tokens; the AVX-512 and
    /// NEON float tiles).
    Rows2(Tiles<W, A, 2>),
}

impl<W, A> TileSet<W, A> {
    /// Weight rows per call (0 without tiles).
    pub fn rows(&self) -> usize {
        match self {
            TileSet::None => 0,
            TileSet::Rows1(_) => 1,
            TileSet::Rows2(_) => 2,
        }
    }
}

/// A weight type's kernels for weights used in place on one path, and the instruction set
/// each is written for (what `kolibri info` prints).
pub struct Dense<W: 'static, A: 'static> {
    pub dot: DotFn<W, A>,
    pub dot_isa: &'static str,
    pub tiles: TileSet<W, A>,
    pub tiles_isa: &'static str,
}

/// One ggml weight type and how Kolibri multiplies it.
pub(crate) trait WeightType: 'static {
    const TYPE: GgmlType;
    /// The ggml block (for float types, one element).
    type Block: Block + Send + Sync + 'static;
    /// The activation element its kernels read.
    type Act: ActElem;
    /// Weights per block.
    const BLOCK_LEN: usize;

    /// Weight row `w` · activation row `a`: the reference, exact integer sums per block
    /// scaled in f32 as llama.cpp's generic kernels do.
    fn dot(w: &[Self::Block], a: &[Self::Act]) -> f32;

    /// Block `b` as `BLOCK_LEN` floats.
    fn dequantize(b: &Self::Block, out: &mut [f32]);

    /// The kernels for weights in place on `path` (the scalar twin where the path has none).
    fn dense(path: CpuPath) -> &'static Dense<Self::Block, Self::Act>;

    /// `n` blocks of random weights for the self-test, from random words: any quants, scales
    /// small and finite.
    fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<Self::Block>;

    /// The 8-row repacked layout, for the types that have one.
    fn layout() -> Option<&'static dyn LayoutKind> {
        None
    }
}

/// Declares weight type `$name` (see [`WeightType`]): its ggml type, block, activation and
/// block length; its reference `dot` and `dequantize`; how a random block's scales are made
/// small (`scales`); its kernel sets per path, by architecture (the scalar twin elsewhere);
/// and its 8-row layout, if it has one.
macro_rules! weight_type {
    // `simd: all`: the kernel sets every path of both architectures has, under their usual
    // names; `simd: arm`: the aarch64 ones only (x86 repacks the type, and its in-place
    // kernels there are the scalar twin).
    (
        $(#[$doc:meta])*
        $name:ident = $ty:ident, $block:ty, $act:ty, $len:expr;
        dot: $dot:path, dequantize: $deq:path, scales: |$b:ident, $bits:ident| $scales:expr;
        simd: all;
        $(layout: $layout:expr;)?
    ) => {
        $crate::kernels::types::weight_type! {
            $(#[$doc])*
            $name = $ty, $block, $act, $len;
            dot: $dot, dequantize: $deq, scales: |$b, $bits| $scales;
            x86 { Avx2 => avx2::DENSE, Avx512 | Amx => avx512::DENSE }
            arm { Neon => neon::BASE, Dotprod => neon::DOTPROD, I8mm => neon::I8MM }
            $(layout: $layout;)?
        }
    };
    (
        $(#[$doc:meta])*
        $name:ident = $ty:ident, $block:ty, $act:ty, $len:expr;
        dot: $dot:path, dequantize: $deq:path, scales: |$b:ident, $bits:ident| $scales:expr;
        simd: arm;
        $(layout: $layout:expr;)?
    ) => {
        $crate::kernels::types::weight_type! {
            $(#[$doc])*
            $name = $ty, $block, $act, $len;
            dot: $dot, dequantize: $deq, scales: |$b, $bits| $scales;
            arm { Neon => neon::BASE, Dotprod => neon::DOTPROD, I8mm => neon::I8MM }
            $(layout: $layout;)?
        }
    };
    (
        $(#[$doc:meta])*
        $name:ident = $ty:ident, $block:ty, $act:ty, $len:expr;
        dot: $dot:path, dequantize: $deq:path, scales: |$b:ident, $bits:ident| $scales:expr;
        $(x86 { $($($xp:ident)|+ => $xd:expr),* $(,)? })?
        $(arm { $($($ap:ident)|+ => $ad:expr),* $(,)? })?
        $(layout: $layout:expr;)?
    ) => {
        $(#[$doc])*
        pub struct $name;

        impl $crate::kernels::types::WeightType for $name {
            const TYPE: $crate::quant::GgmlType = $crate::quant::GgmlType::$ty;
            type Block = $block;
            type Act = $act;
            const BLOCK_LEN: usize = $len;

            fn dot(w: &[$block], a: &[$act]) -> f32 {
                $dot(w, a)
            }

            fn dequantize(b: &$block, out: &mut [f32]) {
                $deq(b, out.try_into().expect("one block"))
            }

            fn dense(
                path: $crate::kernels::CpuPath,
            ) -> &'static $crate::kernels::types::Dense<$block, $act> {
                #[allow(unused_imports)]
                use $crate::kernels::CpuPath;
                const SCALAR: $crate::kernels::types::Dense<$block, $act> =
                    $crate::kernels::types::scalar_dense::<$name>();
                match path {
                    $($(
                        #[cfg(target_arch = "x86_64")]
                        $(CpuPath::$xp)|+ => &$xd,
                    )*)?
                    $($(
                        #[cfg(target_arch = "aarch64")]
                        $(CpuPath::$ap)|+ => &$ad,
                    )*)?
                    _ => &SCALAR,
                }
            }

            fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<$block> {
                let mut v: Vec<$block> = $crate::kernels::types::random_raw(n, bits);
                for $b in v.iter_mut() {
                    let $bits = &mut *bits;
                    $scales;
                }
                v
            }

            $(
                fn layout() -> Option<&'static dyn $crate::kernels::packed::LayoutKind> {
                    Some(&$layout)
                }
            )?
        }
    };
}
pub(crate) use weight_type;

/// The scalar kernel set of `T`: its reference dot, no tiles.
pub(crate) const fn scalar_dense<T: WeightType>() -> Dense<T::Block, T::Act> {
    Dense {
        dot: T::dot,
        dot_isa: "scalar",
        tiles: TileSet::None,
        tiles_isa: "",
    }
}

/// Every weight type Kolibri multiplies.
pub static REGISTRY: [&dyn Kind; 16] = [
    entry::of::<q4_0::Q4_0>(),
    entry::of::<q4_1::Q4_1>(),
    entry::of::<q5_0::Q5_0>(),
    entry::of::<q5_1::Q5_1>(),
    entry::of::<q8_0::Q8_0>(),
    entry::of::<q2_k::Q2K>(),
    entry::of::<q3_k::Q3K>(),
    entry::of::<q4_k::Q4K>(),
    entry::of::<q5_k::Q5K>(),
    entry::of::<q6_k::Q6K>(),
    entry::of::<iq4_nl::IQ4NL>(),
    entry::of::<iq4_xs::IQ4XS>(),
    entry::of::<mxfp4::MXFP4>(),
    entry::of::<float::F16>(),
    entry::of::<float::BF16>(),
    entry::of::<float::F32>(),
];

/// The registry entry of `ty`, if Kolibri multiplies it.
pub fn kind(ty: GgmlType) -> Option<&'static dyn Kind> {
    REGISTRY.iter().copied().find(|k| k.ty() == ty)
}

/// `n` blocks whose bytes come from `bits` (the callers then fix their scales).
pub(crate) fn random_raw<B: Block>(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<B> {
    let mut bytes = vec![0u8; n * std::mem::size_of::<B>()];
    for c in bytes.chunks_mut(8) {
        let w = bits().to_le_bytes();
        c.copy_from_slice(&w[..c.len()]);
    }
    bytes
        .chunks_exact(std::mem::size_of::<B>())
        .map(|b| crate::quant::blocks::read_block(b).expect("one block"))
        .collect()
}

/// A small random f16 scale (|d| < 0.05) from a random word.
pub(crate) fn random_scale(bits: u64) -> half::f16 {
    half::f16::from_f32(((bits >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1)
}

/// The [`TileSet`] of tile kernel `$f` (`Rows1`/`Rows2`: generic over rows and tokens, after
/// the leading type arguments `$g`; `Pairs`: two rows, generic over tokens) at 8, 4 and 2
/// tokens.
macro_rules! tiles {
    (Rows1, $($f:ident)::+ $(, $g:ty)*) => {
        $crate::kernels::types::TileSet::Rows1($crate::kernels::types::Tiles {
            mm: $($f)::+::<$($g,)* 1, { $crate::kernels::types::TILE_TOKENS }>,
            mm4: $($f)::+::<$($g,)* 1, 4>,
            mm2: $($f)::+::<$($g,)* 1, 2>,
        })
    };
    (Rows2, $($f:ident)::+ $(, $g:ty)*) => {
        $crate::kernels::types::TileSet::Rows2($crate::kernels::types::Tiles {
            mm: $($f)::+::<$($g,)* 2, { $crate::kernels::types::TILE_TOKENS }>,
            mm4: $($f)::+::<$($g,)* 2, 4>,
            mm2: $($f)::+::<$($g,)* 2, 2>,
        })
    };
    (Pairs, $($f:ident)::+ $(, $g:ty)*) => {
        $crate::kernels::types::TileSet::Rows2($crate::kernels::types::Tiles {
            mm: $($f)::+::<$($g,)* { $crate::kernels::types::TILE_TOKENS }>,
            mm4: $($f)::+::<$($g,)* 4>,
            mm2: $($f)::+::<$($g,)* 2>,
        })
    };
}
pub(crate) use tiles;

/// Blocks every row of a tile has (the caller passes equal lengths; the minimum keeps the tile
/// kernels' reads in bounds).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn common_len<W, A>(w: &[&[W]], a: &[&[A]]) -> usize {
    w.iter()
        .map(|r| r.len())
        .chain(a.iter().map(|r| r.len()))
        .min()
        .unwrap_or(0)
}
