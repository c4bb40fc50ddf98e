//! One matmul plan per weight matrix, fixed at load: its type's kernels on the backend's path,
//! with the weights in place or repacked into the type's 8-row layout. The plan owns the
//! repack policy, says what its activations need, and is what the forward pass calls;
//! `kolibri info -m MODEL` prints the plan of every tensor.

pub(crate) mod dense;
pub(crate) mod packed;
mod tasks;

use std::sync::{Arc, OnceLock};

use super::activations::{ActNeeds, QuantizedActivations};
use super::backend::{backend, Backend};
use super::cpu::CpuPath;
use super::packed::{PackedWeights, Release};
use super::types::{self, Kind};
use super::KernelError;
use crate::quant::GgmlType;
use dense::DenseRun;

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
        if types::kind(self.ty).is_none() {
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
        // The block's alignment: its widest field (MXFP4's blocks are bytes only).
        let align = match self.ty {
            GgmlType::F32 => 4,
            GgmlType::MXFP4 => 1,
            _ => 2,
        };
        if !(self.data.as_ptr() as usize).is_multiple_of(align) {
            return Err(KernelError::Misaligned(self.ty));
        }
        Ok(())
    }
}

/// How one matrix is multiplied.
#[derive(Clone)]
pub struct MatmulPlan {
    kind: &'static dyn Kind,
    path: CpuPath,
    rows: usize,
    k: usize,
    exec: Exec,
}

#[derive(Clone)]
enum Exec {
    /// Weights read from the file (`bytes` of them, checked at load): the type's dot per
    /// token, tiles for batches.
    InPlace {
        run: &'static dyn DenseRun,
        bytes: usize,
    },
    /// Weights repacked at load.
    Packed(Arc<dyn PackedWeights>),
}

impl std::fmt::Debug for MatmulPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MatmulPlan({} x {} {}: {})",
            self.rows,
            self.k,
            self.kind.ty(),
            self.describe()
        )
    }
}

/// Whether weights of type `ty` are repacked at load: where the type has an 8-row layout, on
/// x86 (the layouts' kernels are x86 only; elsewhere the scalar twin would run), unless
/// `KOLIBRI_REPACK=0` keeps every weight in place.
pub fn repacks(ty: GgmlType) -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    let on =
        *ON.get_or_init(|| !matches!(std::env::var("KOLIBRI_REPACK"), Ok(v) if v.trim() == "0"));
    on && cfg!(target_arch = "x86_64") && types::kind(ty).is_some_and(|k| k.layout().is_some())
}

impl MatmulPlan {
    /// The plan for `w` used in place on `backend`.
    pub fn in_place(backend: &Backend, w: &WeightMatrix) -> Result<MatmulPlan, KernelError> {
        w.validate()?;
        let kind = types::kind(w.ty).ok_or(KernelError::UnsupportedType(w.ty))?;
        Ok(MatmulPlan {
            kind,
            path: backend.path(),
            rows: w.rows,
            k: w.k,
            exec: Exec::InPlace {
                run: kind.dense(backend.path()),
                bytes: w.data.len(),
            },
        })
    }

    /// The plan for a matrix already repacked.
    pub fn repacked(backend: &Backend, w: Arc<dyn PackedWeights>) -> MatmulPlan {
        let kind = types::kind(w.ty()).expect("a repacked type is registered");
        MatmulPlan {
            kind,
            path: backend.path(),
            rows: w.rows(),
            k: w.k(),
            exec: Exec::Packed(w),
        }
    }

    /// The loader's plan for `w`: repacked where [`repacks`] says so and its rows fit the
    /// layout (`done` is told which source bytes the repack has finished with), else in place.
    pub fn for_matrix(
        backend: &Backend,
        w: &WeightMatrix,
        done: &Release<'_>,
    ) -> Result<MatmulPlan, KernelError> {
        let plan = MatmulPlan::in_place(backend, w)?;
        if !Self::would_repack(w.ty, w.k) {
            return Ok(plan);
        }
        let layout = plan
            .kind
            .layout()
            .expect("would_repack: the type has a layout");
        Ok(match layout.repack(w.data, w.rows, w.k, done) {
            Some(p) => MatmulPlan::repacked(backend, p),
            None => plan,
        })
    }

    /// Whether [`MatmulPlan::for_matrix`] repacks a matrix of `ty` with rows of `k`.
    pub fn would_repack(ty: GgmlType, k: usize) -> bool {
        repacks(ty)
            && types::kind(ty)
                .and_then(|t| t.layout())
                .is_some_and(|l| l.fits(k))
    }

    /// What the activations of this matmul must hold.
    pub fn needs(&self) -> ActNeeds {
        ActNeeds {
            format: self.kind.act_format(),
            sides: matches!(self.exec, Exec::Packed(_)),
        }
    }

    /// The repacked matrix, if the plan repacked it.
    pub fn packed(&self) -> Option<&Arc<dyn PackedWeights>> {
        match &self.exec {
            Exec::Packed(p) => Some(p),
            Exec::InPlace { .. } => None,
        }
    }

    /// `out[t * rows + r] = W[r] · x[t]`; `file` holds the matrix's bytes as the file has
    /// them (unread when the plan repacked it).
    pub fn matmul(
        &self,
        file: &[u8],
        act: &QuantizedActivations,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        if act.k() != self.k {
            return Err(KernelError::Shape(format!(
                "weights have k = {}, activations k = {}",
                self.k,
                act.k()
            )));
        }
        if out.len() != self.rows * act.n_tokens() {
            return Err(KernelError::Shape(format!(
                "output length {} != {} rows x {} tokens",
                out.len(),
                self.rows,
                act.n_tokens()
            )));
        }
        if act.format() != self.kind.act_format() {
            return Err(KernelError::ActivationFormat {
                weight: self.kind.ty(),
                got: act.format(),
            });
        }
        if self.rows == 0 || act.n_tokens() == 0 {
            return Ok(());
        }
        match &self.exec {
            Exec::InPlace { run, bytes } => {
                if file.len() != *bytes {
                    return Err(KernelError::Shape(format!(
                        "{} weight bytes given for a plan of {bytes}",
                        file.len()
                    )));
                }
                let w = WeightMatrix {
                    ty: self.kind.ty(),
                    rows: self.rows,
                    k: self.k,
                    data: file,
                };
                run.run(&w, act, out)
            }
            Exec::Packed(p) => p.matmul(self.path, act, out),
        }
    }

    /// What runs, in words.
    pub fn describe(&self) -> String {
        match &self.exec {
            Exec::InPlace { .. } => self.kind.describe_dense(self.path),
            Exec::Packed(p) => p.describe(self.path),
        }
    }
}

/// `out[t * rows + r] = dot(W[r], x[t])` with `w` in place, on the process's backend.
/// Parallel over rows on the caller's pool.
pub fn matmul(
    w: &WeightMatrix,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    MatmulPlan::in_place(backend(), w)?.matmul(w.data, act, out)
}

/// [`matmul`] on an explicit path (the best available one if the CPU lacks `path`).
pub fn matmul_with(
    path: CpuPath,
    w: &WeightMatrix,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    MatmulPlan::in_place(backend_or_best(path), w)?.matmul(w.data, act, out)
}

/// `out[t * rows + r] = W[r] · x[t]` for a repacked matrix on `path` (the best available one
/// if the CPU lacks it).
pub fn matmul_packed_with(
    path: CpuPath,
    w: &Arc<dyn PackedWeights>,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    MatmulPlan::repacked(backend_or_best(path), Arc::clone(w)).matmul(&[], act, out)
}

/// [`matmul_packed_with`] on the process's backend.
pub fn matmul_packed(
    w: &Arc<dyn PackedWeights>,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    matmul_packed_with(backend().path(), w, act, out)
}

/// `rows` × `k` weights of type `ty` repacked from their file bytes into the type's 8-row
/// layout; `None` for a type without one or bytes that do not fit.
pub fn repack(
    ty: GgmlType,
    data: &[u8],
    rows: usize,
    k: usize,
    done: &Release<'_>,
) -> Option<Arc<dyn PackedWeights>> {
    types::kind(ty)?.layout()?.repack(data, rows, k, done)
}

/// A `ty` matrix of `rows` × `k` over arrays already laid out in `map` (a repack cache file),
/// array `i` at byte `offsets[i]`; `None` for a type without a layout, a shape it cannot have,
/// or arrays that do not fit the mapping or their alignment.
pub fn from_mapped(
    ty: GgmlType,
    rows: usize,
    k: usize,
    map: &Arc<memmap2::Mmap>,
    offsets: &[usize],
) -> Option<Arc<dyn PackedWeights>> {
    types::kind(ty)?
        .layout()?
        .from_mapped(rows, k, map, offsets)
}

fn backend_or_best(path: CpuPath) -> &'static Backend {
    Backend::for_path(path)
        .or_else(|| Backend::for_path(CpuPath::best_available()))
        .unwrap_or_else(backend)
}
