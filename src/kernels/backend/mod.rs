//! One backend per CPU path: the instruction set this process runs, chosen once at start-up
//! (`KOLIBRI_CPU`, then a self-test against the scalar twins, stepping down a path on a
//! disagreement), with every non-matmul op the forward pass calls. The matmul kernels live
//! with their weight types ([`super::types`]); a [`super::MatmulPlan`] takes each matrix's
//! kernels for the backend's path once, at load.

mod paths;
mod self_test;

use std::ops::Range;
use std::sync::OnceLock;

use half::f16;

use super::cpu::{self, CpuPath};
use super::ops::attend::{self, AttnScore};
use super::ops::f32_gemm::{GemmShape, Strided};
use super::ops::{delta_rows, exp, gelu};
use crate::quant::blocks::{BlockQ4_0, BlockQ8K, BlockQ8_0};

/// A CPU path and its ops. Only handed out for a path this CPU supports, which is what makes
/// its `unsafe` table entries safe to call.
pub struct Backend {
    path: CpuPath,
    ops: Ops,
}

/// The ops of one path. Every entry is `unsafe` because the SIMD ones need their CPU features.
pub(crate) struct Ops {
    pub quantize_q8_0: unsafe fn(&[f32], &mut [BlockQ8_0]),
    pub quantize_q8_k: unsafe fn(&[f32], &mut [BlockQ8K]),
    pub f16_dot: unsafe fn(&[f32], &[f16]) -> f32,
    pub f16_mad: unsafe fn(&mut [f16], &[f16], f32),
    pub f16_scale: unsafe fn(&mut [f16], f32),
    pub f16_row_to_f32: unsafe fn(&[f16], &mut [f32]),
    pub f16_attend: unsafe fn(&[f32], &attend::Cache, Range<usize>, AttnScore, &mut [f32]),
    pub f32_dots: unsafe fn(&[f32], usize, &[f32], &mut [f32], usize),
    pub delta_rows: delta_rows::RowsFn,
    pub f32_weighted_sum: unsafe fn(&mut [f32], usize, &[f32], &[f32], usize),
    pub f32_gemm: unsafe fn(Strided, &[f32], &mut [f32], GemmShape),
    pub q8_0_to_f32: unsafe fn(&[BlockQ8_0], &mut [f32]),
    pub q4_0_to_f32: unsafe fn(&[BlockQ4_0], &mut [f32]),
    pub exp_lanes: exp::LanesFn,
    pub swiglu: exp::PrefixFn,
    pub geglu: gelu::PrefixFn,
}

/// The backend this process runs: chosen on first use.
pub fn backend() -> &'static Backend {
    static CHOSEN: OnceLock<&'static Backend> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let (mut path, warning) = cpu::requested_path();
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        // Guard against a SIMD kernel misbehaving on hardware it was never run on.
        loop {
            let b = Backend::for_path(path).unwrap_or(&paths::SCALAR);
            // Serially: a pool worker may be waiting on this initialisation (its first kernel
            // call), so a parallel self-test could wait on it in turn.
            match crate::parallel::serially(|| b.self_test()) {
                Ok(()) => return b,
                Err(e) => {
                    let lower = path.lower();
                    eprintln!(
                        "kolibri: {path} kernels failed their self-test ({e}); using {lower}"
                    );
                    path = lower;
                }
            }
        }
    })
}

impl Backend {
    /// The backend of `path`, if this CPU can run it.
    pub fn for_path(path: CpuPath) -> Option<&'static Backend> {
        path.is_available().then(|| paths::of(path))
    }

    /// Every backend this CPU can run, slowest first.
    pub fn available() -> Vec<&'static Backend> {
        CpuPath::available().into_iter().map(paths::of).collect()
    }

    pub fn path(&self) -> CpuPath {
        self.path
    }

    /// Runs every op and every registered weight type's kernels of this backend against the
    /// scalar twins on small deterministic inputs (well under a millisecond). `Err` names
    /// what disagrees.
    pub fn self_test(&self) -> Result<(), String> {
        self_test::run(self)
    }

    /// The Q8_0 activation blocks of `x` (`x.len() == 32 * out.len()`).
    pub fn quantize_q8_0(&self, x: &[f32], out: &mut [BlockQ8_0]) {
        assert_eq!(x.len(), 32 * out.len(), "quantize_q8_0: lengths differ");
        // SAFETY: a backend exists only for a path this CPU runs (`for_path`).
        unsafe { (self.ops.quantize_q8_0)(x, out) }
    }

    /// The Q8_K activation blocks of `x` (`x.len() == 256 * out.len()`).
    pub fn quantize_q8_k(&self, x: &[f32], out: &mut [BlockQ8K]) {
        assert_eq!(x.len(), 256 * out.len(), "quantize_q8_k: lengths differ");
        // SAFETY: as above.
        unsafe { (self.ops.quantize_q8_k)(x, out) }
    }

    /// `q · k` for an f16 row `k`, exactly [`super::ops::f16_rows::f16_dot`].
    pub fn f16_dot(&self, q: &[f32], k: &[f16]) -> f32 {
        assert_eq!(q.len(), k.len(), "f16_dot: lengths differ");
        // SAFETY: as above.
        unsafe { (self.ops.f16_dot)(q, k) }
    }

    /// `acc[i] = f16(v[i] * w + acc[i])` (one rounding per element).
    pub fn f16_mad(&self, acc: &mut [f16], v: &[f16], w: f32) {
        assert_eq!(acc.len(), v.len(), "f16_mad: lengths differ");
        // SAFETY: as above.
        unsafe { (self.ops.f16_mad)(acc, v, w) }
    }

    /// `acc[i] = f16(acc[i] * s)`.
    pub fn f16_scale(&self, acc: &mut [f16], s: f32) {
        // SAFETY: as above.
        unsafe { (self.ops.f16_scale)(acc, s) }
    }

    /// `dst[i] = src[i]` widened to f32 (exact on every path).
    pub fn f16_row_to_f32(&self, src: &[f16], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len(), "f16_row_to_f32: lengths differ");
        // SAFETY: as above.
        unsafe { (self.ops.f16_row_to_f32)(src, dst) }
    }

    /// One query head's pass over cache rows `rows` with an online softmax, the way ggml's
    /// per-query flash-attention kernel computes: `q16` already rounded to f16, the value
    /// accumulator held in f16, rescaled whenever a new maximum score appears. Key row `p` is
    /// `keys[p * stride_k..][..q16.len()]`, value row `p` is
    /// `values[p * stride_v..][..out.len()]`. Writes the attention output (f32) to `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn f16_attend(
        &self,
        q16: &[f32],
        keys: &[f16],
        values: &[f16],
        (stride_k, stride_v): (usize, usize),
        rows: Range<usize>,
        score: AttnScore,
        out: &mut [f32],
    ) {
        let (hk, hv) = (q16.len(), out.len());
        assert!(
            rows.is_empty()
                || ((rows.end - 1) * stride_k + hk <= keys.len()
                    && (rows.end - 1) * stride_v + hv <= values.len()),
            "f16_attend: rows beyond the cache"
        );
        let cache = attend::Cache {
            keys,
            values,
            stride_k,
            stride_v,
        };
        // SAFETY: as above; the rows are inside the cache (checked).
        unsafe { (self.ops.f16_attend)(q16, &cache, rows, score, out) }
    }

    /// `out[g * stride + j] = q[g] · rows[j]` for the `d`-long queries packed in `q` and rows
    /// packed in `rows` (each row is read once for all queries).
    pub fn f32_dots(&self, q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
        let (n_q, n) = (q.len() / d.max(1), rows.len() / d.max(1));
        assert!(
            q.len() == n_q * d
                && rows.len() == n * d
                && (n_q == 0 || (n_q - 1) * stride + n <= out.len()),
            "f32_dots: shapes differ"
        );
        // SAFETY: as above; shapes checked.
        unsafe { (self.ops.f32_dots)(q, d, rows, out, stride) }
    }

    /// The Gated DeltaNet step on one head's state `s` ([head_v][head_k]): per value row `j`,
    /// `row *= decay; delta = beta (v[j] - row . k); row += delta k; o[j] = scale (row . q)`,
    /// with `gates = [decay, beta, scale]`.
    pub fn delta_rows(
        &self,
        s: &mut [f32],
        q: &[f32],
        k: &[f32],
        v: &[f32],
        gates: [f32; 3],
        o: &mut [f32],
    ) {
        assert!(
            q.len() == k.len() && s.len() == k.len() * v.len() && o.len() == v.len(),
            "delta_rows: shapes differ"
        );
        // SAFETY: as above; shapes checked.
        unsafe { (self.ops.delta_rows)(s, q, k, v, gates, o) }
    }

    /// `acc[g] += sum_j w[g * stride + j] * rows[j]` for the `d`-long accumulators packed in
    /// `acc` and rows packed in `rows`.
    pub fn f32_weighted_sum(
        &self,
        acc: &mut [f32],
        d: usize,
        rows: &[f32],
        w: &[f32],
        stride: usize,
    ) {
        let (n_acc, n) = (acc.len() / d.max(1), rows.len() / d.max(1));
        assert!(
            acc.len() == n_acc * d
                && rows.len() == n * d
                && (n_acc == 0 || (n_acc - 1) * stride + n <= w.len()),
            "f32_weighted_sum: shapes differ"
        );
        // SAFETY: as above; shapes checked.
        unsafe { (self.ops.f32_weighted_sum)(acc, d, rows, w, stride) }
    }

    /// `c[i * ldc + j] (+)= Σ_p a(i, p) · b[p * ldb + j]`: the f32 product of attention
    /// tiles, every element one fused multiply-add per term in order of `p` (the same bits on
    /// every path).
    pub fn f32_gemm(&self, a: Strided, b: &[f32], c: &mut [f32], shape: GemmShape) {
        assert!(
            shape.fits(&a, b.len(), c.len()),
            "f32_gemm: {shape:?} outside its slices"
        );
        // SAFETY: as above; every element read or written is inside its slice (checked).
        unsafe { (self.ops.f32_gemm)(a, b, c, shape) }
    }

    /// Q8_0 blocks widened: `out[32 b + i] = d_b * q_b[i]` (the same bits on every path).
    pub fn q8_0_to_f32(&self, blocks: &[BlockQ8_0], out: &mut [f32]) {
        assert_eq!(blocks.len() * 32, out.len(), "q8_0_to_f32: lengths differ");
        // SAFETY: as above; lengths checked.
        unsafe { (self.ops.q8_0_to_f32)(blocks, out) }
    }

    /// Q4_0 blocks widened: `out[32 b + i] = d_b * (q_b[i] - 8)` (the same bits on every path).
    pub fn q4_0_to_f32(&self, blocks: &[BlockQ4_0], out: &mut [f32]) {
        assert_eq!(blocks.len() * 32, out.len(), "q4_0_to_f32: lengths differ");
        // SAFETY: as above; lengths checked.
        unsafe { (self.ops.q4_0_to_f32)(blocks, out) }
    }

    /// `x[i] = e^(x[i] - shift)`; returns the sum of the new values (the same bits on every
    /// path).
    pub fn exp_shifted_sum(&self, x: &mut [f32], shift: f32) -> f32 {
        // SAFETY: as above.
        unsafe { exp::shifted_sum(self.ops.exp_lanes, x, shift) }
    }

    /// `gate[i] = silu(gate[i]) * up[i]` (the same bits on every path).
    pub fn swiglu(&self, gate: &mut [f32], up: &[f32]) {
        // SAFETY: as above.
        unsafe { exp::swiglu(self.ops.swiglu, gate, up) }
    }

    /// `gate[i] = gelu_tanh(gate[i]) * up[i]`, GELU through ggml's f16 table (the same bits on
    /// every path).
    pub fn geglu(&self, gate: &mut [f32], up: &[f32]) {
        // SAFETY: as above.
        unsafe { gelu::geglu(self.ops.geglu, gate, up) }
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.path)
    }
}
