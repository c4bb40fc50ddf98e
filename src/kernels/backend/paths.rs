//! The backends, one per CPU path: which version of each op it runs.

use super::{Backend, Ops};
use crate::kernels::cpu::CpuPath;
#[cfg(target_arch = "x86_64")]
use crate::kernels::ops::quantize_avx2;
use crate::kernels::ops::{attend, delta_rows, exp, f16_rows, f32_gemm, f32_rows, gelu, kv_rows};
use crate::quant::activation;

/// The scalar twins: the reference every other backend is tested against.
const SCALAR_OPS: Ops = Ops {
    quantize_q8_0: activation::quantize_row_q8_0,
    quantize_q8_k: activation::quantize_row_q8_k,
    f16_dot: f16_rows::f16_dot,
    f16_mad: f16_rows::f16_mad,
    f16_scale: f16_rows::f16_scale,
    f16_row_to_f32: f16_rows::f16_row_to_f32,
    f16_attend: attend::scalar,
    f32_dots: f32_rows::f32_dots,
    delta_rows: delta_rows::delta_rows,
    f32_weighted_sum: f32_rows::f32_weighted_sum,
    f32_gemm: f32_gemm::f32_gemm,
    q8_0_to_f32: kv_rows::q8_0_to_f32,
    q4_0_to_f32: kv_rows::q4_0_to_f32,
    exp_lanes: exp::shifted_lanes,
    swiglu: exp::no_prefix,
    geglu: gelu::no_prefix,
};

#[cfg(target_arch = "x86_64")]
const AVX2_OPS: Ops = Ops {
    quantize_q8_0: quantize_avx2::quantize_row_q8_0,
    quantize_q8_k: quantize_avx2::quantize_row_q8_k,
    f16_dot: f16_rows::avx2::f16_dot,
    f16_mad: f16_rows::avx2::f16_mad,
    f16_scale: f16_rows::avx2::f16_scale,
    f16_row_to_f32: f16_rows::avx2::f16_row_to_f32,
    f16_attend: attend::avx2,
    f32_dots: f32_rows::avx2::f32_dots,
    delta_rows: delta_rows::avx2::delta_rows,
    f32_weighted_sum: f32_rows::avx2::f32_weighted_sum,
    f32_gemm: f32_gemm::avx2::f32_gemm,
    q8_0_to_f32: kv_rows::avx2::q8_0_to_f32,
    q4_0_to_f32: kv_rows::avx2::q4_0_to_f32,
    exp_lanes: exp::avx2::shifted_lanes,
    swiglu: exp::avx2::swiglu,
    geglu: gelu::avx2::geglu,
};

/// AVX2's ops with 16-lane attention kernels and `exp` (the rest measured no faster on 16
/// lanes or have no wider version).
#[cfg(target_arch = "x86_64")]
const AVX512_OPS: Ops = Ops {
    f32_dots: f32_rows::avx512::f32_dots,
    f32_weighted_sum: f32_rows::avx512::f32_weighted_sum,
    f32_gemm: f32_gemm::avx512::f32_gemm,
    q8_0_to_f32: kv_rows::avx512::q8_0_to_f32,
    q4_0_to_f32: kv_rows::avx512::q4_0_to_f32,
    exp_lanes: exp::avx512::shifted_lanes,
    ..AVX2_OPS
};

pub(super) static SCALAR: Backend = Backend {
    path: CpuPath::Scalar,
    ops: SCALAR_OPS,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Backend = Backend {
    path: CpuPath::Avx2,
    ops: AVX2_OPS,
};

#[cfg(target_arch = "x86_64")]
static AVX512: Backend = Backend {
    path: CpuPath::Avx512,
    ops: AVX512_OPS,
};

/// AVX-512's ops; its matmul plans add AMX tiles for prompt batches.
#[cfg(target_arch = "x86_64")]
static AMX: Backend = Backend {
    path: CpuPath::Amx,
    ops: AVX512_OPS,
};

/// The NEON paths run the scalar twins for the element-wise ops (no NEON versions yet) and
/// NEON for matmuls, attention tiles and the delta-net step.
#[cfg(target_arch = "aarch64")]
const NEON_OPS: Ops = Ops {
    f32_gemm: f32_gemm::neon::f32_gemm,
    delta_rows: delta_rows::neon::delta_rows,
    q8_0_to_f32: kv_rows::neon::q8_0_to_f32,
    q4_0_to_f32: kv_rows::neon::q4_0_to_f32,
    ..SCALAR_OPS
};

#[cfg(target_arch = "aarch64")]
static NEON: Backend = Backend {
    path: CpuPath::Neon,
    ops: NEON_OPS,
};

#[cfg(target_arch = "aarch64")]
static DOTPROD: Backend = Backend {
    path: CpuPath::Dotprod,
    ops: NEON_OPS,
};

#[cfg(target_arch = "aarch64")]
static I8MM: Backend = Backend {
    path: CpuPath::I8mm,
    ops: NEON_OPS,
};

/// The backend of `path` (the caller has checked that the CPU runs it).
pub(super) fn of(path: CpuPath) -> &'static Backend {
    match path {
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx2 => &AVX2,
        #[cfg(target_arch = "x86_64")]
        CpuPath::Avx512 => &AVX512,
        #[cfg(target_arch = "x86_64")]
        CpuPath::Amx => &AMX,
        #[cfg(target_arch = "aarch64")]
        CpuPath::Neon => &NEON,
        #[cfg(target_arch = "aarch64")]
        CpuPath::Dotprod => &DOTPROD,
        #[cfg(target_arch = "aarch64")]
        CpuPath::I8mm => &I8MM,
        _ => &SCALAR,
    }
}
