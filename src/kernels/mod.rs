//! Dot-product and matmul kernels: a scalar reference plus AVX2 and AVX-512 versions, chosen
//! once at run time, behind one model-facing entry point ([`matmul`]).
//!
//! Weights are used in place (raw ggml blocks from the mapped file). Activations are quantized
//! once per input into the format the weight type's integer kernel needs (Q8_0 for
//! Q4_0/Q5_0/Q8_0, Q8_K for the K-quants, f16/bf16 for F16/BF16 weights like llama.cpp, f32
//! for F32), so several matmuls reading the same input can share them.

use std::fmt;
use std::sync::OnceLock;

use half::{bf16, f16};

use crate::parallel::Disjoint;
use crate::quant::activation::{quantize_row_q8_0, quantize_row_q8_k};
use crate::quant::blocks::*;
use crate::quant::types::{GgmlType, QK_K};

/// `[e(0), .., e(N - 1)]` built in the kernel itself. `std::array::from_fn` would call the
/// closure from outside: a closure has the kernel's target features, `from_fn` has not, so it
/// is never inlined (profiled: a call per block and register, 8% of a prompt pass).
#[cfg(target_arch = "x86_64")]
macro_rules! each {
    ($n:expr, $zero:expr, |$k:ident| $e:expr) => {{
        let mut v = [$zero; $n];
        for ($k, slot) in v.iter_mut().enumerate() {
            *slot = $e;
        }
        v
    }};
}

mod activations;
#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod amx_blocks32;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx2_interleaved;
#[cfg(target_arch = "x86_64")]
mod avx2_quantize;
#[cfg(target_arch = "x86_64")]
mod avx2_tiles;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
pub mod avx512_interleaved;
#[cfg(target_arch = "x86_64")]
mod avx512_tiles;
mod f16_vec;
mod gelu;
mod info;
pub mod interleaved;
#[cfg(target_arch = "aarch64")]
pub mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_i8mm;
#[cfg(target_arch = "aarch64")]
mod neon_tiles;
pub mod scalar;
mod vexp;

use activations::ActData;
pub use activations::{activation_format, supports, ActFormat, ActSource, QuantizedActivations};
pub use f16_vec::{
    f16_attend, f16_attend_with, f16_dot, f16_dot_with, f16_mad, f16_mad_with, f16_row_to_f32,
    f16_row_to_f32_with, f16_scale, f16_scale_with, f32_dots, f32_weighted_sum,
};
pub use gelu::{geglu, geglu_with};
pub use info::{cpu_features, system_info};
pub use vexp::{exp_shifted_sum, exp_shifted_sum_with, swiglu, swiglu_with};

/// Errors the model can check for at load time (types, shapes) or hit on a malformed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelError {
    /// No dot-product kernel for this weight type.
    UnsupportedType(GgmlType),
    /// Activations were quantized for a different weight type family.
    ActivationFormat { weight: GgmlType, got: ActFormat },
    /// Sizes that do not fit together (message says which).
    Shape(String),
    /// The weight bytes are not aligned for the block type.
    Misaligned(GgmlType),
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::UnsupportedType(t) => write!(f, "no matmul kernel for weight type {t}"),
            KernelError::ActivationFormat { weight, got } => {
                write!(f, "weights of type {weight} cannot use {got:?} activations")
            }
            KernelError::Shape(m) => write!(f, "matmul shape error: {m}"),
            KernelError::Misaligned(t) => write!(f, "{t} weight data is misaligned"),
        }
    }
}

impl std::error::Error for KernelError {}

/// Instruction-set path for the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuPath {
    Scalar,
    /// AVX2 + FMA + F16C.
    Avx2,
    /// AVX-512 F/BW/VL + VNNI (plus the AVX2 set).
    Avx512,
    /// aarch64 NEON (every armv8-a core).
    Neon,
    /// aarch64 NEON with the dot-product extension (`sdot`; armv8.2-a+dotprod).
    Dotprod,
    /// [`CpuPath::Dotprod`] plus the int8 matrix-multiply extension (`smmla`; i8mm) for batches.
    I8mm,
}

impl CpuPath {
    pub fn name(self) -> &'static str {
        match self {
            CpuPath::Scalar => "scalar",
            CpuPath::Avx2 => "avx2",
            CpuPath::Avx512 => "avx512",
            CpuPath::Neon => "neon",
            CpuPath::Dotprod => "dotprod",
            CpuPath::I8mm => "i8mm",
        }
    }

    /// Whether this CPU can run the path.
    pub fn is_available(self) -> bool {
        match self {
            CpuPath::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx2 => avx2::detected(),
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx512 => avx512::detected(),
            #[cfg(target_arch = "aarch64")]
            CpuPath::Neon => true,
            #[cfg(target_arch = "aarch64")]
            CpuPath::Dotprod => neon::dotprod_detected(),
            #[cfg(target_arch = "aarch64")]
            CpuPath::I8mm => neon_i8mm::detected(),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The fastest path this CPU supports.
    pub fn best_available() -> CpuPath {
        *CpuPath::available().last().unwrap_or(&CpuPath::Scalar)
    }

    /// Every path this CPU supports, slowest first (tests run all of them).
    pub fn available() -> Vec<CpuPath> {
        [
            CpuPath::Scalar,
            CpuPath::Avx2,
            CpuPath::Avx512,
            CpuPath::Neon,
            CpuPath::Dotprod,
            CpuPath::I8mm,
        ]
        .into_iter()
        .filter(|p| p.is_available())
        .collect()
    }

    fn parse(s: &str) -> Option<CpuPath> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Some(CpuPath::Scalar),
            "avx2" => Some(CpuPath::Avx2),
            "avx512" => Some(CpuPath::Avx512),
            "neon" => Some(CpuPath::Neon),
            "dotprod" => Some(CpuPath::Dotprod),
            "i8mm" => Some(CpuPath::I8mm),
            _ => None,
        }
    }
}

impl fmt::Display for CpuPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Resolves a `KOLIBRI_CPU` value against what the CPU has. Returns the path and, when the
/// request could not be honoured, a warning for stderr. Asking for more than the CPU has falls
/// back to the best available path (never an illegal instruction).
pub fn resolve_cpu_path(request: Option<&str>) -> (CpuPath, Option<String>) {
    let best = CpuPath::best_available();
    let Some(req) = request.filter(|s| !s.trim().is_empty()) else {
        return (best, None);
    };
    match CpuPath::parse(req) {
        None => (
            best,
            Some(format!(
                "kolibri: KOLIBRI_CPU={req:?} not understood \
                 (scalar|avx2|avx512|neon|dotprod|i8mm); using {best}"
            )),
        ),
        Some(p) if p.is_available() => (p, None),
        Some(p) => (
            best,
            Some(format!(
                "kolibri: KOLIBRI_CPU={p} not supported by this CPU; using {best}"
            )),
        ),
    }
}

/// The path used by [`matmul`]: detected once, overridable downward with `KOLIBRI_CPU`.
pub fn cpu_path() -> CpuPath {
    static PATH: OnceLock<CpuPath> = OnceLock::new();
    *PATH.get_or_init(|| {
        let env = std::env::var("KOLIBRI_CPU").ok();
        let (mut path, warning) = resolve_cpu_path(env.as_deref());
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        // Guard against a SIMD kernel misbehaving on hardware it was never run on: check it
        // against the scalar twin once and step down a path if it disagrees.
        while let Err(e) = self_test(path) {
            let lower = match path {
                CpuPath::Avx512 => CpuPath::Avx2,
                CpuPath::I8mm => CpuPath::Dotprod,
                CpuPath::Dotprod => CpuPath::Neon,
                _ => CpuPath::Scalar,
            };
            eprintln!("kolibri: {path} kernels failed their self-test ({e}); using {lower}");
            path = lower;
        }
        path
    })
}

/// Runs every kernel of `path` against the scalar kernels on small deterministic random
/// inputs (a few microseconds). `Err` names the first kernel that disagrees.
pub fn self_test(path: CpuPath) -> Result<(), String> {
    if !path.is_available() {
        return Err(format!("{path} is not supported by this CPU"));
    }
    if path == CpuPath::Scalar {
        return Ok(());
    }
    let kt = kernels(path);
    let mut seed = 0x2545f4914f6cdd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Three 256-element blocks (odd, so pair loops see a tail) and 3 * 8 32-element blocks.
    const N: usize = 3 * QK_K;
    let xs: Vec<f32> = (0..N)
        .map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect();
    let ws: Vec<f32> = (0..N).map(|_| f32::from_bits(next() as u32)).collect();
    let raw = block_bytes(&ws);
    let scale = |v: u64| f16::from_f32(((v >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1);
    fn blocks<B: Block>(raw: &[u8], n: usize) -> Vec<B> {
        cast_blocks::<B>(&raw[..n * std::mem::size_of::<B>()])
            .map(<[B]>::to_vec)
            .unwrap_or_default()
    }
    let mut q8_0 = vec![
        BlockQ8_0 {
            d: f16::ZERO,
            qs: [0; 32]
        };
        N / 32
    ];
    quantize_row_q8_0(&xs, &mut q8_0);
    let zero_k = BlockQ8K {
        d: 0.0,
        qs: [0; QK_K],
        bsums: [0; QK_K / 16],
    };
    let mut q8k = vec![zero_k; N / QK_K];
    quantize_row_q8_k(&xs, &mut q8k);
    let x16: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
    let xb16: Vec<bf16> = xs.iter().map(|&v| bf16::from_f32(v)).collect();
    let wf: Vec<f32> = xs.iter().rev().copied().collect();
    let w16: Vec<f16> = wf.iter().map(|&v| f16::from_f32(v)).collect();
    let wb16: Vec<bf16> = wf.iter().map(|&v| bf16::from_f32(v)).collect();

    let mut failures = Vec::new();
    let mut check = |name: &str, got: f32, want: f32, mag: f32| {
        // NaN must count as a failure.
        let err = (got - want).abs();
        if err.is_nan() || err > 5e-4 * mag {
            failures.push(format!("{name}: {got} vs {want}"));
        }
    };
    macro_rules! t {
        ($name:literal, $kern:ident, $w:expr, $a:expr) => {{
            let (w, a) = (&$w[..], &$a[..]);
            // SAFETY: `kt` is a table for a path this CPU supports (checked above).
            let (got, want) = unsafe { ((kt.$kern)(w, a), (SCALAR.$kern)(w, a)) };
            check($name, got, want, want.abs().max(1.0));
        }};
    }
    // Tile kernels: every (row, token) of a tile over copies of the same rows.
    macro_rules! tt {
        ($name:literal, $tiles:ident, $kern:ident, $w:expr, $a:expr) => {{
            let (w, a) = (&$w[..], &$a[..]);
            // SAFETY: as above.
            let want = unsafe { (SCALAR.$kern)(w, a) };
            // SAFETY: as above.
            let got: Vec<f32> = match &kt.$tiles {
                TileSet::None => Vec::new(),
                TileSet::Rows1(tl) => unsafe { (tl.mm)([w], [a; MM_T]) }.as_flattened().to_vec(),
                TileSet::Rows2(tl) => unsafe { (tl.mm)([w; 2], [a; MM_T]) }
                    .as_flattened()
                    .to_vec(),
            };
            for g in got {
                check($name, g, want, want.abs().max(1.0));
            }
        }};
    }
    let mut q4_0: Vec<BlockQ4_0> = blocks(raw, N / 32);
    q4_0.iter_mut().for_each(|b| b.d = scale(next()));
    t!("q4_0", q4_0, q4_0, q8_0);
    tt!("q4_0 tile", q4_0_t, q4_0, q4_0, q8_0);
    let mut q5_0: Vec<BlockQ5_0> = blocks(raw, N / 32);
    q5_0.iter_mut().for_each(|b| b.d = scale(next()));
    t!("q5_0", q5_0, q5_0, q8_0);
    tt!("q5_0 tile", q5_0_t, q5_0, q5_0, q8_0);
    let mut w8_0: Vec<BlockQ8_0> = blocks(raw, N / 32);
    w8_0.iter_mut().for_each(|b| b.d = scale(next()));
    t!("q8_0", q8_0, w8_0, q8_0);
    tt!("q8_0 tile", q8_0_t, q8_0, w8_0, q8_0);
    let mut q2k: Vec<BlockQ2K> = blocks(raw, N / QK_K);
    q2k.iter_mut()
        .for_each(|b| (b.d, b.dmin) = (scale(next()), scale(next())));
    t!("q2_k", q2_k, q2k, q8k);
    let mut q3k: Vec<BlockQ3K> = blocks(raw, N / QK_K);
    q3k.iter_mut().for_each(|b| b.d = scale(next()));
    t!("q3_k", q3_k, q3k, q8k);
    let mut q4k: Vec<BlockQ4K> = blocks(raw, N / QK_K);
    q4k.iter_mut()
        .for_each(|b| (b.d, b.dmin) = (scale(next()), scale(next())));
    t!("q4_k", q4_k, q4k, q8k);
    tt!("q4_k tile", q4_k_t, q4_k, q4k, q8k);
    let mut q5k: Vec<BlockQ5K> = blocks(raw, N / QK_K);
    q5k.iter_mut()
        .for_each(|b| (b.d, b.dmin) = (scale(next()), scale(next())));
    t!("q5_k", q5_k, q5k, q8k);
    let mut q6k: Vec<BlockQ6K> = blocks(raw, N / QK_K);
    q6k.iter_mut().for_each(|b| b.d = scale(next()));
    t!("q6_k", q6_k, q6k, q8k);
    tt!("q6_k tile", q6_k_t, q6_k, q6k, q8k);
    t!("f16", f16, w16, x16);
    t!("bf16", bf16, wb16, xb16);
    t!("f32", f32, wf, xs);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join(", "))
    }
}

/// A weight matrix viewed in place: `rows` rows of `k` elements of type `ty`, raw bytes
/// (usually from the mmap).
#[derive(Clone, Copy, Debug)]
pub struct WeightMatrix<'a> {
    pub ty: GgmlType,
    pub rows: usize,
    pub k: usize,
    pub data: &'a [u8],
}

impl WeightMatrix<'_> {
    /// Checks type support, row length, byte size and alignment.
    pub fn validate(&self) -> Result<(), KernelError> {
        if !supports(self.ty) {
            return Err(KernelError::UnsupportedType(self.ty));
        }
        let row_bytes = self.ty.row_bytes(self.k as u64).ok_or_else(|| {
            KernelError::Shape(format!(
                "row length {} is not a multiple of the {} block size",
                self.k, self.ty
            ))
        })?;
        let want = (row_bytes as u128) * self.rows as u128;
        if want != self.data.len() as u128 {
            return Err(KernelError::Shape(format!(
                "{} x {} {} needs {want} bytes, got {}",
                self.rows,
                self.k,
                self.ty,
                self.data.len()
            )));
        }
        let align = match self.ty {
            GgmlType::F32 => 4,
            _ => 2,
        };
        if !(self.data.as_ptr() as usize).is_multiple_of(align) {
            return Err(KernelError::Misaligned(self.ty));
        }
        Ok(())
    }
}

type DotFn<W, A> = unsafe fn(&[W], &[A]) -> f32;

/// An element of a float weight type widened to f32 exactly: the scalar tails of the float
/// tile kernels (AVX2 and NEON; AVX-512 masks its last slice instead).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
trait Widen: Copy {
    fn widen(self) -> f32;
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
impl Widen for f32 {
    fn widen(self) -> f32 {
        self
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
impl Widen for f16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
impl Widen for bf16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

/// Blocks every row of a tile has (the caller passes equal lengths; the minimum keeps the tile
/// kernels' reads in bounds).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn common_len<W, A>(w: &[&[W]], a: &[&[A]]) -> usize {
    w.iter()
        .map(|r| r.len())
        .chain(a.iter().map(|r| r.len()))
        .min()
        .unwrap_or(0)
}

/// Tokens of a matmul tile kernel (8 tokens measured faster than 4 on every tiled AVX2 type);
/// kernels of 4 and 2 tokens take token tails. Single tokens (matvec and the last tail token)
/// use the dot kernels, which measured as fast as multi-row tiles for one token on AVX2.
const MM_T: usize = 8;

/// Dot products of `R` weight rows with `T` activation rows: `out[r][t]`.
type TileFn<W, A, const R: usize, const T: usize> =
    unsafe fn([&[W]; R], [&[A]; T]) -> [[f32; T]; R];

/// Tile kernels of one weight type: results match the type's dot kernel per (row, token) up
/// to f32 rounding.
struct Tiles<W: 'static, A: 'static, const R: usize> {
    mm: TileFn<W, A, R, MM_T>,
    mm4: TileFn<W, A, R, 4>,
    mm2: TileFn<W, A, R, 2>,
}

/// A weight type's tile kernels on one path, by weight rows per call.
enum TileSet<W: 'static, A: 'static> {
    None,
    /// One row per call (AVX2).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Rows1(Tiles<W, A, 1>),
    /// Two rows per call (i8mm: `smmla` multiplies two rows by two tokens; the AVX-512 float
    /// tiles).
    Rows2(Tiles<W, A, 2>),
}

impl<W, A> TileSet<W, A> {
    /// Weight rows per call (0 without tiles).
    fn rows(&self) -> usize {
        match self {
            TileSet::None => 0,
            TileSet::Rows1(_) => 1,
            TileSet::Rows2(_) => 2,
        }
    }
}

/// One path's kernels. Every entry is `unsafe` because SIMD ones require their CPU features;
/// a table is only handed out for a path the CPU supports.
struct Kernels {
    q4_0: DotFn<BlockQ4_0, BlockQ8_0>,
    q5_0: DotFn<BlockQ5_0, BlockQ8_0>,
    q8_0: DotFn<BlockQ8_0, BlockQ8_0>,
    q2_k: DotFn<BlockQ2K, BlockQ8K>,
    q3_k: DotFn<BlockQ3K, BlockQ8K>,
    q4_k: DotFn<BlockQ4K, BlockQ8K>,
    q5_k: DotFn<BlockQ5K, BlockQ8K>,
    q6_k: DotFn<BlockQ6K, BlockQ8K>,
    f16: DotFn<f16, f16>,
    bf16: DotFn<bf16, bf16>,
    f32: DotFn<f32, f32>,
    q4_0_t: TileSet<BlockQ4_0, BlockQ8_0>,
    q5_0_t: TileSet<BlockQ5_0, BlockQ8_0>,
    q8_0_t: TileSet<BlockQ8_0, BlockQ8_0>,
    q4_k_t: TileSet<BlockQ4K, BlockQ8K>,
    q6_k_t: TileSet<BlockQ6K, BlockQ8K>,
    f16_t: TileSet<f16, f16>,
    bf16_t: TileSet<bf16, bf16>,
    f32_t: TileSet<f32, f32>,
}

/// The AVX2 tile kernels of one weight type.
#[cfg(target_arch = "x86_64")]
macro_rules! avx2_tiles {
    ($f:ident) => {
        TileSet::Rows1(Tiles {
            mm: avx2_tiles::$f::<1, MM_T>,
            mm4: avx2_tiles::$f::<1, 4>,
            mm2: avx2_tiles::$f::<1, 2>,
        })
    };
    (float_tile::<$e:ty>) => {
        TileSet::Rows1(Tiles {
            mm: avx2_tiles::float_tile::<$e, 1, MM_T>,
            mm4: avx2_tiles::float_tile::<$e, 1, 4>,
            mm2: avx2_tiles::float_tile::<$e, 1, 2>,
        })
    };
}

/// The AVX-512 tile kernels of one float type: two rows per call.
#[cfg(target_arch = "x86_64")]
macro_rules! avx512_tiles {
    (float_tile::<$e:ty>) => {
        TileSet::Rows2(Tiles {
            mm: avx512_tiles::float_tile::<$e, 2, MM_T>,
            mm4: avx512_tiles::float_tile::<$e, 2, 4>,
            mm2: avx512_tiles::float_tile::<$e, 2, 2>,
        })
    };
}

const SCALAR: Kernels = Kernels {
    q4_0: scalar::vec_dot_q4_0_q8_0,
    q5_0: scalar::vec_dot_q5_0_q8_0,
    q8_0: scalar::vec_dot_q8_0_q8_0,
    q2_k: scalar::vec_dot_q2_k_q8_k,
    q3_k: scalar::vec_dot_q3_k_q8_k,
    q4_k: scalar::vec_dot_q4_k_q8_k,
    q5_k: scalar::vec_dot_q5_k_q8_k,
    q6_k: scalar::vec_dot_q6_k_q8_k,
    f16: scalar::vec_dot_f16_f16,
    bf16: scalar::vec_dot_bf16_bf16,
    f32: scalar::vec_dot_f32_f32,
    q4_0_t: TileSet::None,
    q5_0_t: TileSet::None,
    q8_0_t: TileSet::None,
    q4_k_t: TileSet::None,
    q6_k_t: TileSet::None,
    f16_t: TileSet::None,
    bf16_t: TileSet::None,
    f32_t: TileSet::None,
};

#[cfg(target_arch = "x86_64")]
const AVX2: Kernels = Kernels {
    q4_0: avx2::vec_dot_q4_0_q8_0,
    q5_0: avx2::vec_dot_q5_0_q8_0,
    q8_0: avx2::vec_dot_q8_0_q8_0,
    q2_k: scalar::vec_dot_q2_k_q8_k,
    q3_k: scalar::vec_dot_q3_k_q8_k,
    q4_k: avx2::vec_dot_q4_k_q8_k,
    q5_k: avx2::vec_dot_q5_k_q8_k,
    q6_k: avx2::vec_dot_q6_k_q8_k,
    f16: avx2::vec_dot_f16_f16,
    bf16: avx2::vec_dot_bf16_bf16,
    f32: avx2::vec_dot_f32_f32,
    q4_0_t: avx2_tiles!(q4_0_tile),
    q5_0_t: avx2_tiles!(q5_0_tile),
    q8_0_t: avx2_tiles!(q8_0_tile),
    q4_k_t: avx2_tiles!(q4_k_tile),
    q6_k_t: avx2_tiles!(q6_k_tile),
    f16_t: avx2_tiles!(float_tile::<f16>),
    bf16_t: avx2_tiles!(float_tile::<bf16>),
    f32_t: avx2_tiles!(float_tile::<f32>),
};

#[cfg(target_arch = "x86_64")]
const AVX512: Kernels = Kernels {
    q4_0: avx512::vec_dot_q4_0_q8_0,
    q5_0: avx512::vec_dot_q5_0_q8_0,
    q8_0: avx512::vec_dot_q8_0_q8_0,
    q2_k: scalar::vec_dot_q2_k_q8_k,
    q3_k: scalar::vec_dot_q3_k_q8_k,
    q4_k: avx512::vec_dot_q4_k_q8_k,
    q5_k: avx512::vec_dot_q5_k_q8_k,
    q6_k: avx512::vec_dot_q6_k_q8_k,
    f16: avx512::vec_dot_f16_f16,
    bf16: avx512::vec_dot_bf16_bf16,
    f32: avx512::vec_dot_f32_f32,
    // Batches of weights kept in place (Q4_0; the others with KOLIBRI_REPACK=0) take the AVX2
    // tiles: faster than the VNNI dot kernel per token here in 15 of 16 measurements (Q4_0,
    // Q8_0, Q4_K, Q6_K; 2048 x 2048, 8 and 64 tokens, one thread; up to 2.5x; Q8_0 at 8
    // tokens once 0.88x).
    q4_0_t: avx2_tiles!(q4_0_tile),
    q5_0_t: avx2_tiles!(q5_0_tile),
    q8_0_t: avx2_tiles!(q8_0_tile),
    q4_k_t: avx2_tiles!(q4_k_tile),
    q6_k_t: avx2_tiles!(q6_k_tile),
    f16_t: avx512_tiles!(float_tile::<f16>),
    bf16_t: avx512_tiles!(float_tile::<bf16>),
    f32_t: avx512_tiles!(float_tile::<f32>),
};

/// The NEON tables: dot kernels for the types of the reference models, Q4_0, F16, BF16 and
/// F32 (Q2_K, Q3_K and Q5_K use the scalar ones); quantized batches go through the dot kernels
/// per token, or through 2-row `smmla` tiles where the CPU has i8mm; float batches through
/// 2-row NEON tiles.
#[cfg(target_arch = "aarch64")]
macro_rules! neon_table {
    ($m:ident) => {
        neon_table!($m, {})
    };
    ($m:ident, { $($tiles:tt)* }) => {
        Kernels {
            q4_0: neon::$m::vec_dot_q4_0_q8_0,
            q5_0: neon::$m::vec_dot_q5_0_q8_0,
            q8_0: neon::$m::vec_dot_q8_0_q8_0,
            q4_k: neon::$m::vec_dot_q4_k_q8_k,
            q6_k: neon::$m::vec_dot_q6_k_q8_k,
            f16: neon::vec_dot_f16_f16,
            bf16: neon::vec_dot_bf16_bf16,
            f32: neon::vec_dot_f32_f32,
            f16_t: neon_float_tiles!(f16),
            bf16_t: neon_float_tiles!(bf16),
            f32_t: neon_float_tiles!(f32),
            $($tiles)*
            ..SCALAR
        }
    };
}

/// The NEON tile kernels of one float type: two rows per call.
#[cfg(target_arch = "aarch64")]
macro_rules! neon_float_tiles {
    ($e:ty) => {
        TileSet::Rows2(Tiles {
            mm: neon_tiles::float_tile::<$e, 2, MM_T>,
            mm4: neon_tiles::float_tile::<$e, 2, 4>,
            mm2: neon_tiles::float_tile::<$e, 2, 2>,
        })
    };
}

/// The i8mm tile kernels of one weight type.
#[cfg(target_arch = "aarch64")]
macro_rules! i8mm_tiles {
    ($f:ident) => {
        TileSet::Rows2(Tiles {
            mm: neon_i8mm::$f::<MM_T>,
            mm4: neon_i8mm::$f::<4>,
            mm2: neon_i8mm::$f::<2>,
        })
    };
}

#[cfg(target_arch = "aarch64")]
const NEON: Kernels = neon_table!(base);

#[cfg(target_arch = "aarch64")]
const DOTPROD: Kernels = neon_table!(dotprod);

#[cfg(target_arch = "aarch64")]
const I8MM: Kernels = neon_table!(dotprod, {
    q4_0_t: i8mm_tiles!(q4_0_tile),
    q5_0_t: i8mm_tiles!(q5_0_tile),
    q8_0_t: i8mm_tiles!(q8_0_tile),
    q4_k_t: i8mm_tiles!(q4_k_tile),
    q6_k_t: i8mm_tiles!(q6_k_tile),
});

/// The kernel table for `path`, or the best available one if the CPU lacks it (so a table
/// handed out is always safe to call).
fn kernels(path: CpuPath) -> &'static Kernels {
    let path = if path.is_available() {
        path
    } else {
        CpuPath::best_available()
    };
    match path {
        CpuPath::Scalar => &SCALAR,
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 => &AVX2,
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx512 => &AVX512,
        #[cfg(target_arch = "aarch64")]
        CpuPath::Neon => &NEON,
        #[cfg(target_arch = "aarch64")]
        CpuPath::Dotprod => &DOTPROD,
        #[cfg(target_arch = "aarch64")]
        CpuPath::I8mm => &I8MM,
        #[allow(unreachable_patterns)]
        _ => &SCALAR,
    }
}

/// How `path` multiplies weights of type `ty` (for `kolibri info`); `None` if unsupported.
pub fn describe_kernel(path: CpuPath, ty: GgmlType) -> Option<String> {
    let k = kernels(path);
    // A SIMD table entry that still points at the scalar kernel has no SIMD version yet.
    let simd = |ours: usize, scalar: usize| ours != scalar;
    let (dot_simd, tiles) = match ty {
        GgmlType::Q4_0 => (simd(k.q4_0 as usize, SCALAR.q4_0 as usize), k.q4_0_t.rows()),
        GgmlType::Q5_0 => (simd(k.q5_0 as usize, SCALAR.q5_0 as usize), k.q5_0_t.rows()),
        GgmlType::Q8_0 => (simd(k.q8_0 as usize, SCALAR.q8_0 as usize), k.q8_0_t.rows()),
        GgmlType::Q2_K => (simd(k.q2_k as usize, SCALAR.q2_k as usize), 0),
        GgmlType::Q3_K => (simd(k.q3_k as usize, SCALAR.q3_k as usize), 0),
        GgmlType::Q4_K => (simd(k.q4_k as usize, SCALAR.q4_k as usize), k.q4_k_t.rows()),
        GgmlType::Q5_K => (simd(k.q5_k as usize, SCALAR.q5_k as usize), 0),
        GgmlType::Q6_K => (simd(k.q6_k as usize, SCALAR.q6_k as usize), k.q6_k_t.rows()),
        GgmlType::F16 => (simd(k.f16 as usize, SCALAR.f16 as usize), k.f16_t.rows()),
        GgmlType::BF16 => (simd(k.bf16 as usize, SCALAR.bf16 as usize), k.bf16_t.rows()),
        GgmlType::F32 => (simd(k.f32 as usize, SCALAR.f32 as usize), k.f32_t.rows()),
        _ => return None,
    };
    let float = matches!(ty, GgmlType::F16 | GgmlType::BF16 | GgmlType::F32);
    let dot = match path {
        _ if !dot_simd => "scalar",
        // The float dot kernels are plain NEON on every aarch64 path.
        _ if float && cfg!(target_arch = "aarch64") => CpuPath::Neon.name(),
        // i8mm only adds tiles; single tokens use the dotprod kernels.
        CpuPath::I8mm => CpuPath::Dotprod.name(),
        _ => path.name(),
    };
    let act = match activation_format(ty)? {
        ActFormat::Q8_0 => "q8_0",
        ActFormat::Q8K => "q8_k",
        ActFormat::F16 => "f16",
        ActFormat::BF16 => "bf16",
        ActFormat::F32 => "f32",
    };
    if repacks(ty) {
        let simd = match path {
            CpuPath::Scalar => "scalar x8 kernels".to_string(),
            CpuPath::Avx512 => match pair_min_tokens(ty) {
                1 => "avx512 vnni kernels on two groups (16 rows) per call".to_string(),
                m => format!(
                    "avx512 vnni kernels on two groups (16 rows) per call of {m}+ tokens, \
                     avx2 x8 kernels below"
                ),
            },
            _ => "avx2 x8 kernels".to_string(),
        };
        let width = x8_width(ty);
        let amx = path == CpuPath::Avx512 && amx_enabled();
        let tiles = match amx {
            true => "; amx-int8 tiles for 16-token tiles of batches (KOLIBRI_AMX=0: off)",
            false => "",
        };
        return Some(format!(
            "activations {act}; repacked into 8-row groups at load; {simd}, \
             calls of up to {width} tokens{tiles} (KOLIBRI_REPACK=0: in place)"
        ));
    }
    let batches = if tiles == 2 {
        // Two-row tiles: i8mm for quantized types; plain NEON or AVX-512 for floats.
        let name = match (float, cfg!(target_arch = "aarch64")) {
            (false, _) => path.name(),
            (true, true) => CpuPath::Neon.name(),
            (true, false) => CpuPath::Avx512.name(),
        };
        format!("{name} 2-row x {MM_T}-token tiles")
    } else if tiles == 1 {
        // One-row tiles are the AVX2 ones, on the AVX-512 path too.
        format!("avx2 {MM_T}-token tiles")
    } else {
        format!("{dot} dot per token")
    };
    Some(format!(
        "activations {act}; 1 token: {dot} dot; batches: {batches}"
    ))
}

/// `out[t * rows + r] = dot(W[r], x[t])` for every token `t` and row `r`, on the dispatched
/// path. Parallel over rows on rayon's current pool (the caller's `ThreadPool::install`).
pub fn matmul(
    w: &WeightMatrix,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    matmul_with(cpu_path(), w, act, out)
}

/// [`matmul`] on an explicit path (falls back to the best available if the CPU lacks `path`).
pub fn matmul_with(
    path: CpuPath,
    w: &WeightMatrix,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    w.validate()?;
    if act.k != w.k {
        return Err(KernelError::Shape(format!(
            "weights have k = {}, activations k = {}",
            w.k, act.k
        )));
    }
    if out.len() != w.rows * act.n_tokens {
        return Err(KernelError::Shape(format!(
            "output length {} != {} rows x {} tokens",
            out.len(),
            w.rows,
            act.n_tokens
        )));
    }
    let mismatch = || KernelError::ActivationFormat {
        weight: w.ty,
        got: act.format(),
    };
    if activation_format(w.ty) != Some(act.format()) {
        return Err(mismatch());
    }
    if w.rows == 0 || act.n_tokens == 0 {
        return Ok(());
    }
    let kt = kernels(path);
    let shape = Shape {
        rows: w.rows,
        n_tokens: act.n_tokens,
        k: w.k,
    };
    macro_rules! go {
        ($act:ident, $kern:ident) => {{
            let blocks = cast_blocks(w.data).ok_or(KernelError::Misaligned(w.ty))?;
            run(blocks, $act, shape, out, kt.$kern, &TileSet::None)
        }};
        ($act:ident, $kern:ident, $tiles:ident) => {{
            let blocks = cast_blocks(w.data).ok_or(KernelError::Misaligned(w.ty))?;
            run(blocks, $act, shape, out, kt.$kern, &kt.$tiles)
        }};
    }
    use GgmlType as T;
    match (&act.data, w.ty) {
        (ActData::Q8_0(a), T::Q4_0) => go!(a, q4_0, q4_0_t),
        (ActData::Q8_0(a), T::Q5_0) => go!(a, q5_0, q5_0_t),
        (ActData::Q8_0(a), T::Q8_0) => go!(a, q8_0, q8_0_t),
        (ActData::Q8K(a), T::Q2_K) => go!(a, q2_k),
        (ActData::Q8K(a), T::Q3_K) => go!(a, q3_k),
        (ActData::Q8K(a), T::Q4_K) => go!(a, q4_k, q4_k_t),
        (ActData::Q8K(a), T::Q5_K) => go!(a, q5_k),
        (ActData::Q8K(a), T::Q6_K) => go!(a, q6_k, q6_k_t),
        (ActData::F16(a), T::F16) => go!(a, f16, f16_t),
        (ActData::BF16(a), T::BF16) => go!(a, bf16, bf16_t),
        (ActData::F32(a), T::F32) => go!(a, f32, f32_t),
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// Which weights are repacked at load into interleaved layouts ([`interleaved`]): Q5_0, Q8_0,
/// Q4_K and Q6_K on x86, unless `KOLIBRI_REPACK=0` keeps every weight in place (for comparing
/// against the in-place kernels). `cargo bench --bench interleaved` measures both.
pub fn repacks(ty: GgmlType) -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    let on =
        *ON.get_or_init(|| !matches!(std::env::var("KOLIBRI_REPACK"), Ok(v) if v.trim() == "0"));
    if !cfg!(target_arch = "x86_64") {
        // The interleaved kernels exist for x86 only; elsewhere the scalar twin would run.
        return false;
    }
    on && matches!(
        ty,
        GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::Q4_K | GgmlType::Q6_K
    )
}

/// Most tokens per interleaved kernel call: each call unpacks a weight block once for all its
/// tokens, so every batch size up to this gets a single call of its own width.
const X8_T: usize = 8;

/// Widest call per layout. Measured on one thread, 4096 × 1536, the two splits alternated in
/// one run: one call of 5-8 tokens beat a 4-token call plus the rest by 5-14% for Q4_K, Q5_0
/// and Q8_0; Q6_K gained 10% at 5 tokens and lost 28% at 6 (its accumulators spill).
fn x8_width(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q6_K => 5,
        _ => X8_T,
    }
}

/// Fewest tokens per call at which the AVX-512 two-group kernels beat the AVX2 one-group
/// ones (`cargo bench --bench interleaved`, one thread): Q4_K and Q6_K from one token
/// (1.1-1.7x); Q5_0 and Q8_0 from 6 (1.2-1.9x), below that joining the two groups' lines costs
/// more than the wider multiply-adds save (0.55-1.0x at 1-4 tokens).
fn pair_min_tokens(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q5_0 | GgmlType::Q8_0 => 6,
        _ => 1,
    }
}

/// `$rows.$f::<T>(args)` with the const `T` = `$step` (1..=8).
#[cfg(target_arch = "x86_64")]
macro_rules! by_width {
    ($step:expr, $rows:ident . $f:ident ($($arg:expr),*)) => {
        match $step {
            8 => $rows.$f::<8>($($arg),*),
            7 => $rows.$f::<7>($($arg),*),
            6 => $rows.$f::<6>($($arg),*),
            5 => $rows.$f::<5>($($arg),*),
            4 => $rows.$f::<4>($($arg),*),
            3 => $rows.$f::<3>($($arg),*),
            2 => $rows.$f::<2>($($arg),*),
            _ => $rows.$f::<1>($($arg),*),
        }
    };
}

/// Up to [`X8_T`] token rows of quantized activations, in both formats (one of them empty).
#[cfg(target_arch = "x86_64")]
struct X8Rows<'a> {
    a: &'a [&'a [BlockQ8_0]; X8_T],
    sides: &'a [&'a [interleaved::Q8Side]; X8_T],
    k: &'a [&'a [BlockQ8K]; X8_T],
    k_sides: &'a [&'a [interleaved::Q8KSide]; X8_T],
}

#[cfg(target_arch = "x86_64")]
impl X8Rows<'_> {
    /// Rows of group `g` × the first `T` tokens into `out[..T]`.
    ///
    /// # Safety
    /// AVX2, FMA and F16C; every token row has `w.nb()` blocks (and sides, for Q8_0 rows).
    #[inline]
    unsafe fn group<const T: usize>(
        &self,
        w: &interleaved::PackedMatrix,
        g: usize,
        out: &mut [[f32; interleaved::GROUP]],
    ) {
        use avx2_interleaved::*;
        use interleaved::PackedMatrix;
        let a: [&[BlockQ8_0]; T] = std::array::from_fn(|j| self.a[j]);
        let s: [&[interleaved::Q8Side]; T] = std::array::from_fn(|j| self.sides[j]);
        let k: [&[BlockQ8K]; T] = std::array::from_fn(|j| self.k[j]);
        let rows = match w {
            PackedMatrix::Q5_0(w) => q5_0x8_group::<T>(w, g, a, s),
            PackedMatrix::Q8_0(w) => q8_0x8_group::<T>(w, g, a, s),
            PackedMatrix::Q4K(w) => q4_kx8_group::<T>(w, g, k),
            PackedMatrix::Q6K(w) => q6_kx8_group::<T>(w, g, k),
        };
        out[..T].copy_from_slice(&rows);
    }

    /// Rows of groups `g` and `g + 1` × the first `T` tokens into `out[..T]`.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C; both groups exist; rows as for `group`.
    #[inline]
    unsafe fn pair<const T: usize>(
        &self,
        w: &interleaved::PackedMatrix,
        g: usize,
        out: &mut [[f32; avx512_interleaved::PAIR]],
    ) {
        use avx512_interleaved::*;
        use interleaved::PackedMatrix;
        let a: [&[BlockQ8_0]; T] = std::array::from_fn(|j| self.a[j]);
        let s: [&[interleaved::Q8Side]; T] = std::array::from_fn(|j| self.sides[j]);
        let k: [&[BlockQ8K]; T] = std::array::from_fn(|j| self.k[j]);
        let ks: [&[interleaved::Q8KSide]; T] = std::array::from_fn(|j| self.k_sides[j]);
        let rows = match w {
            PackedMatrix::Q5_0(w) => q5_0x8_pair::<T>(w, g, a, s),
            PackedMatrix::Q8_0(w) => q8_0x8_pair::<T>(w, g, a, s),
            PackedMatrix::Q4K(w) => q4_kx8_pair::<T>(w, g, k, ks),
            PackedMatrix::Q6K(w) => q6_kx8_pair::<T>(w, g, k),
        };
        out[..T].copy_from_slice(&rows);
    }
}

/// `out[t * rows + r] = dot(W[r], x[t])` for a repacked matrix, on the dispatched path.
pub fn matmul_packed(
    w: &interleaved::PackedMatrix,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    matmul_packed_with(cpu_path(), w, act, out)
}

/// [`matmul_packed`] on an explicit path (the scalar twin unless the CPU has AVX2), with AMX
/// tiles for prompt batches where [`amx_enabled`].
pub fn matmul_packed_with(
    path: CpuPath,
    w: &interleaved::PackedMatrix,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    matmul_packed_tiles(path, amx_enabled(), w, act, out)
}

/// Whether AVX-512 runs use AMX-INT8 tiles for batches of 16 tokens or more: where the CPU
/// and OS allow them, unless `KOLIBRI_AMX=0` (or `KOLIBRI_CPU` picks a lower path).
pub fn amx_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let off = matches!(std::env::var("KOLIBRI_AMX"), Ok(v) if v.trim() == "0");
        !off && amx_available()
    })
}

/// Whether this CPU and OS allow the AMX-INT8 tile kernels (whatever `KOLIBRI_AMX` says).
pub fn amx_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx::detected();
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// [`matmul_packed_with`] choosing AMX tiles explicitly (`amx`: use them where the CPU has
/// them and `path` is AVX-512). Both give the same bits.
pub fn matmul_packed_tiles(
    path: CpuPath,
    amx: bool,
    w: &interleaved::PackedMatrix,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    use interleaved::{PackedMatrix, TokenRows, GROUP};
    let wrong_format = || KernelError::ActivationFormat {
        weight: w.ty(),
        got: act.format(),
    };
    if activation_format(w.ty()) != Some(act.format()) {
        return Err(wrong_format());
    }
    let (rows, n) = (w.rows(), act.n_tokens);
    if act.k != w.k() || out.len() != rows * n {
        return Err(KernelError::Shape(format!(
            "{rows} x {} weights, {n} x {} activations, output {}",
            w.k(),
            act.k,
            out.len()
        )));
    }
    let nb = w.nb();
    let (a8, ak): (&[BlockQ8_0], &[BlockQ8K]) = match &act.data {
        ActData::Q8_0(a) => (a, &[]),
        ActData::Q8K(a) => (&[], a),
        _ => return Err(wrong_format()),
    };
    // The kernels read each Q8_0 block's scale and offset from them. The quantizer skips
    // them where nothing is repacked; a caller repacking by hand gets them here.
    let owned;
    let sides = match w {
        PackedMatrix::Q5_0(_) | PackedMatrix::Q8_0(_) if act.block_sides.len() != a8.len() => {
            owned = interleaved::block_sides(a8);
            &owned
        }
        _ => &act.block_sides,
    };
    // The K-quant kernels' per-block activation sums, likewise.
    #[cfg(target_arch = "x86_64")]
    let owned_k;
    #[cfg(target_arch = "x86_64")]
    let k_sides = match w {
        PackedMatrix::Q4K(_) | PackedMatrix::Q6K(_) if act.k_sides.len() != ak.len() => {
            owned_k = interleaved::k_block_sides(ak);
            &owned_k
        }
        _ => &act.k_sides,
    };
    let groups = w.groups();
    let simd = cfg!(target_arch = "x86_64") && path != CpuPath::Scalar && path.is_available();
    // Two groups per call on AVX-512; tasks and row blocks hold whole pairs where they can.
    let wide = simd && path == CpuPath::Avx512;
    #[cfg(target_arch = "x86_64")]
    let tiles = wide && amx && amx::detected();
    #[cfg(not(target_arch = "x86_64"))]
    let _ = amx;
    let pairs = |groups: usize| {
        if wide {
            groups.next_multiple_of(2)
        } else {
            groups
        }
    };
    let threads = crate::parallel::threads();
    let chunk = pairs(task_rows(groups, GROUP * w.k() * n, threads, 1));
    // Groups whose weights stay in L2 while each token chunk passes over them.
    let block = pairs((ROW_BLOCK_BYTES / w.group_bytes().max(1)).max(1));
    let is_k = matches!(w, PackedMatrix::Q4K(_) | PackedMatrix::Q6K(_));
    let width = x8_width(w.ty());
    #[cfg(target_arch = "x86_64")]
    let pair_min = pair_min_tokens(w.ty());
    let ptr = Disjoint::new(out);
    let task = move |c: usize| {
        let (g0, g1) = (c * chunk, ((c + 1) * chunk).min(groups));
        // Rows from group g's first on, for token t (one or two groups), as one store of a
        // fixed size where the groups are whole: a checked store per element was 6% of a
        // prompt pass, a `memcpy` call per group 2%. The partial copy stays out of line:
        // inlined, LLVM merged both into one `memcpy` call of a computed size (6% of a
        // 512-token pass on the AMX path, `perf`).
        fn put<const N: usize>(out: Disjoint<f32>, rows: usize, g: usize, t: usize, o: &[f32; N]) {
            let row0 = g * GROUP;
            let len = N.min(rows.saturating_sub(row0));
            // SAFETY: t < n and rows row0..row0 + len < rows index `out`; the groups are this
            // task's.
            let dst = unsafe { out.slice(t * rows + row0, len) };
            match <&mut [f32; N]>::try_from(&mut *dst) {
                Ok(whole) => *whole = *o,
                Err(_) => put_partial(dst, o),
            }
        }
        #[cold]
        #[inline(never)]
        fn put_partial(dst: &mut [f32], o: &[f32]) {
            dst.copy_from_slice(&o[..dst.len()]);
        }
        // Token rows of whichever format these activations have (empty for the other).
        let arow = |t: usize| a8.get(t * nb..(t + 1) * nb).unwrap_or(&[]);
        let krow = |t: usize| ak.get(t * nb..(t + 1) * nb).unwrap_or(&[]);
        let srow = |t: usize| sides.get(t * nb..(t + 1) * nb).unwrap_or(&[]);
        #[cfg(target_arch = "x86_64")]
        let ksrow = |t: usize| k_sides.get(t * nb..(t + 1) * nb).unwrap_or(&[]);
        let mut o = [[0f32; GROUP]; X8_T];
        #[cfg(target_arch = "x86_64")]
        let mut o2 = [[0f32; avx512_interleaved::PAIR]; X8_T];
        // Groups ga..gb × tokens ta..n on the vector kernels.
        let mut vector = |ga: usize, gb: usize, ta: usize| {
            for b0 in (ga..gb).step_by(block) {
                let b1 = (b0 + block).min(gb);
                let mut t = ta;
                while t < n {
                    let step = (n - t).min(width);
                    let ar: [&[BlockQ8_0]; X8_T] =
                        std::array::from_fn(|j| arow((t + j).min(n - 1)));
                    let kr: [&[BlockQ8K]; X8_T] = std::array::from_fn(|j| krow((t + j).min(n - 1)));
                    let sr: [&[interleaved::Q8Side]; X8_T] =
                        std::array::from_fn(|j| srow((t + j).min(n - 1)));
                    #[cfg(target_arch = "x86_64")]
                    let ksr: [&[interleaved::Q8KSide]; X8_T] =
                        std::array::from_fn(|j| ksrow((t + j).min(n - 1)));
                    let mut g = b0;
                    while g < b1 {
                        #[cfg(target_arch = "x86_64")]
                        if wide && step >= pair_min && g + 1 < b1 {
                            let o = &mut o2[..step];
                            // SAFETY: `wide` means the dispatched path is AVX-512 (self-tested);
                            // groups g and g + 1 exist; every token row has `nb` blocks and sums.
                            unsafe {
                                let rows = X8Rows {
                                    a: &ar,
                                    sides: &sr,
                                    k: &kr,
                                    k_sides: &ksr,
                                };
                                by_width!(step, rows.pair(w, g, o));
                            }
                            for (j, o) in o.iter().enumerate() {
                                put(ptr, rows, g, t + j, o);
                            }
                            g += 2;
                            continue;
                        }
                        let o = &mut o[..step];
                        if !simd {
                            let rows = if is_k {
                                TokenRows::Q8K(&kr[..step])
                            } else {
                                TokenRows::Q8_0(&ar[..step], &sr[..step])
                            };
                            w.scalar_group(g, rows, o);
                        } else {
                            #[cfg(target_arch = "x86_64")]
                            // SAFETY: `simd` means the dispatched path is AVX2 or better
                            // (self-tested); every token row has `nb` blocks and sums.
                            unsafe {
                                let rows = X8Rows {
                                    a: &ar,
                                    sides: &sr,
                                    k: &kr,
                                    k_sides: &ksr,
                                };
                                by_width!(step, rows.group(w, g, o));
                            }
                        }
                        o.iter()
                            .enumerate()
                            .for_each(|(j, o)| put(ptr, rows, g, t + j, o));
                        g += 1;
                    }
                    t += step;
                }
            }
        };
        // Whole pairs × whole 16-token tiles on AMX where it is on; the rest as above.
        #[cfg(target_arch = "x86_64")]
        if tiles && n >= amx::TILE_TOKENS && g1 - g0 >= 2 {
            let (gp, nt) = (
                g0 + (g1 - g0) / 2 * 2,
                n / amx::TILE_TOKENS * amx::TILE_TOKENS,
            );
            let mut put_pair = |g: usize, t0: usize, o: &[[f32; avx512_interleaved::PAIR]]| {
                for (t, o) in (t0..).zip(o) {
                    put(ptr, rows, g, t, o);
                }
            };
            // SAFETY: `tiles` means the path is AVX-512 and AMX is granted; g0..gp are whole
            // pairs of existing groups; `ak` holds n token rows of nb blocks.
            unsafe {
                let a8 = (a8, &sides[..]);
                match w {
                    PackedMatrix::Q4K(w) => {
                        amx::matmul_pairs(w, g0, gp, (ak, k_sides), nt, &mut put_pair)
                    }
                    PackedMatrix::Q6K(w) => {
                        amx::matmul_pairs(w, g0, gp, (ak, k_sides), nt, &mut put_pair)
                    }
                    PackedMatrix::Q5_0(w) => {
                        amx_blocks32::matmul_pairs(w, g0, gp, a8, nt, &mut put_pair)
                    }
                    PackedMatrix::Q8_0(w) => {
                        amx_blocks32::matmul_pairs(w, g0, gp, a8, nt, &mut put_pair)
                    }
                }
            }
            vector(gp, g1, 0);
            vector(g0, gp, nt);
            return;
        }
        vector(g0, g1, 0);
    };
    let n_chunks = groups.div_ceil(chunk.max(1));
    // Serial for one chunk or one thread.
    crate::parallel::for_each(n_chunks, task);
    Ok(())
}

#[derive(Clone, Copy)]
struct Shape {
    rows: usize,
    n_tokens: usize,
    k: usize,
}

/// Bytes of weight rows in one row block: they stay in L2 while every token group passes
/// over them, and a token group's activations stay in L1 while the block's rows stream by.
const ROW_BLOCK_BYTES: usize = 96 * 1024;
/// Minimum multiply-adds per parallel task (about 5-10 us), so scheduling overhead stays
/// small.
const MIN_TASK_MACS: usize = 1 << 16;

/// Rows per parallel task: about 4 tasks per thread for balance, at least `MIN_TASK_MACS` of
/// work each unless that would leave a thread idle while there is work enough for all, and
/// equal tasks in a multiple of the thread count so no thread waits on a lone straggler.
/// Tasks hold whole tiles of `tile_rows` rows.
fn task_rows(rows: usize, row_macs: usize, threads: usize, tile_rows: usize) -> usize {
    let rows = rows.max(1);
    let min_rows = (MIN_TASK_MACS / row_macs.max(1)).max(1);
    let mut n = rows.div_ceil(rows.div_ceil(4 * threads).max(min_rows));
    if threads > 1 && rows * row_macs >= threads * MIN_TASK_MACS {
        n = n.max(threads);
    }
    if n > 1 {
        n = n.next_multiple_of(threads);
    }
    rows.div_ceil(n.min(rows)).next_multiple_of(tile_rows)
}

/// One tile kernel over rows `[b0, b1)` (whole tiles only) and tokens `[t, t + T)`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn tile_pass<W, A, const R: usize, const T: usize>(
    tile: TileFn<W, A, R, T>,
    w: &[W],
    a: &[A],
    nb: usize,
    rows: usize,
    (b0, b1): (usize, usize),
    t: usize,
    out: Disjoint<f32>,
) {
    let ar: [&[A]; T] = std::array::from_fn(|j| &a[(t + j) * nb..(t + j + 1) * nb]);
    let mut r = b0;
    while r + R <= b1 {
        let wr: [&[W]; R] = std::array::from_fn(|i| &w[(r + i) * nb..(r + i + 1) * nb]);
        // SAFETY: tiles come from a table for a path the CPU supports (see `kernels()`),
        // and all rows have `nb` blocks.
        let v = unsafe { tile(wr, ar) };
        for (i, vr) in v.iter().enumerate() {
            for (j, &x) in vr.iter().enumerate() {
                // SAFETY: r + i < rows and t + j < n_tokens (callers pass whole tiles), so
                // the index is in bounds of the output; these rows belong to the caller's task.
                unsafe { out.write((t + j) * rows + r + i, x) };
            }
        }
        r += R;
    }
}

/// Every whole tile of rows `[b0, b1)` over as many tokens as tiles cover (8s, then a 4, then
/// a 2); returns that token count.
#[allow(clippy::too_many_arguments)]
#[inline]
fn tile_tokens<W, A, const R: usize>(
    tl: &Tiles<W, A, R>,
    w: &[W],
    a: &[A],
    nb: usize,
    rows: usize,
    n_tokens: usize,
    block: (usize, usize),
    out: Disjoint<f32>,
) -> usize {
    let mut t = 0;
    while t + MM_T <= n_tokens {
        tile_pass(tl.mm, w, a, nb, rows, block, t, out);
        t += MM_T;
    }
    if t + 4 <= n_tokens {
        tile_pass(tl.mm4, w, a, nb, rows, block, t, out);
        t += 4;
    }
    if t + 2 <= n_tokens {
        tile_pass(tl.mm2, w, a, nb, rows, block, t, out);
        t += 2;
    }
    t
}

fn run<W: Sync, A: Sync>(
    w: &[W],
    a: &[A],
    shape: Shape,
    out: &mut [f32],
    dot: DotFn<W, A>,
    tiles: &TileSet<W, A>,
) {
    let Shape { rows, n_tokens, k } = shape;
    let nb = w.len() / rows;
    debug_assert_eq!(nb * n_tokens, a.len());
    let row_bytes = std::mem::size_of_val(w) / rows;
    let tile_rows = tiles.rows().max(1);
    let row_block = (ROW_BLOCK_BYTES / row_bytes.max(1)).next_multiple_of(tile_rows);

    let threads = crate::parallel::threads();
    let chunk = task_rows(rows, k * n_tokens, threads, tile_rows);
    let n_chunks = rows.div_ceil(chunk);
    let ptr = Disjoint::new(out);
    let wrow = |r: usize| &w[r * nb..(r + 1) * nb];
    let arow = |t: usize| &a[t * nb..(t + 1) * nb];

    let task = move |c: usize| {
        let r0 = c * chunk;
        let r1 = (r0 + chunk).min(rows);
        // SAFETY (for every write below): t < n_tokens and r < rows, so the index is in
        // bounds of `out` (len rows * n_tokens), and row r belongs to this task only.
        let put = |r: usize, t: usize, v: f32| unsafe { ptr.write(t * rows + r, v) };
        for b0 in (r0..r1).step_by(row_block) {
            let b1 = (b0 + row_block).min(r1);
            let block = (b0, b1);
            let t = match tiles {
                TileSet::None => 0,
                TileSet::Rows1(tl) => tile_tokens(tl, w, a, nb, rows, n_tokens, block, ptr),
                TileSet::Rows2(tl) => tile_tokens(tl, w, a, nb, rows, n_tokens, block, ptr),
            };
            // Tokens [0, t) are done for rows [b0, r_mm).
            let r_mm = if t > 0 {
                b0 + (b1 - b0) / tile_rows * tile_rows
            } else {
                b0
            };
            // Whatever the tiles left (token and row tails; everything without tiles), one
            // by one.
            for r in b0..b1 {
                let wr = wrow(r);
                let from = if r >= r_mm { 0 } else { t };
                for tt in from..n_tokens {
                    // SAFETY: as above.
                    put(r, tt, unsafe { dot(wr, arow(tt)) });
                }
            }
        }
    };
    // Serial for one chunk or one thread.
    crate::parallel::for_each(n_chunks, task);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (tasks, largest task) for a matrix of `rows` rows, `k * n` MACs per row.
    fn split(rows: usize, k: usize, n: usize, threads: usize) -> (usize, usize) {
        let c = task_rows(rows, k * n, threads, 1);
        (rows.div_ceil(c), c)
    }

    #[test]
    fn task_split_keeps_threads_busy() {
        // Small K/V projection: every thread gets work at prompt and at generation size.
        assert!(split(128, 896, 256, 2).0 >= 4);
        assert!(split(128, 896, 1, 2).0 >= 2);
        // Equal tasks, a multiple of the threads.
        let (n, c) = split(896, 896, 1, 2);
        assert_eq!(n % 2, 0);
        assert!(c * n - 896 < n);
        // Big matrices: about 4 tasks per thread.
        assert_eq!(split(8960, 1536, 256, 2).0, 8);
        // Tiny work: one task, no scheduling.
        assert_eq!(split(16, 64, 1, 2).0, 1);
        // One thread: few big tasks; every row covered.
        let (n, c) = split(4864, 896, 1, 1);
        assert!(n * c >= 4864 && n <= 4);
        assert_eq!(split(1, 32, 1, 4), (1, 1));
    }
}
