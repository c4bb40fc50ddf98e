//! A matrix referenced by its byte range in the mapped file, and how it is multiplied: in place
//! or repacked at load.

use std::sync::Arc;

use crate::gguf::GgufFile;
use crate::kernels::{
    self, KernelError, MatmulPlan, PackedWeights, QuantizedActivations, WeightMatrix,
};
use crate::model::error::ModelError;
use crate::model::load::{release_pages, RepackProgress};
use crate::quant::encode::quantize_row;
use crate::quant::{dequant::dequantize_row, GgmlType};
use rayon::prelude::*;

/// A matrix `W[rows][k]` used as `y = W x`, referenced by its byte range in the file.
#[derive(Clone, Debug)]
pub struct Linear {
    pub name: String,
    pub ty: GgmlType,
    /// Output features (ggml `ne[1]`).
    pub rows: usize,
    /// Input features (ggml `ne[0]`).
    pub k: usize,
    pub(super) start: usize,
    pub(super) len: usize,
    /// How it is multiplied: in place, or repacked at load into 8-row groups (the types
    /// [`kernels::repacks`] names), the repacked copy used instead of the file bytes.
    pub plan: MatmulPlan,
}

impl Linear {
    pub fn matrix<'a>(&self, gguf: &'a GgufFile) -> WeightMatrix<'a> {
        WeightMatrix {
            ty: self.ty,
            rows: self.rows,
            k: self.k,
            data: &gguf.file_bytes()[self.start..self.start + self.len],
        }
    }

    /// `out = self · act` by the plan.
    pub fn matmul(
        &self,
        gguf: &GgufFile,
        act: &QuantizedActivations,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        self.plan.matmul(self.matrix(gguf).data, act, out)
    }

    /// The repacked copy, if the plan has one.
    pub fn packed(&self) -> Option<&Arc<dyn PackedWeights>> {
        self.plan.packed()
    }

    /// Takes the loader's plan: repacked into 8-row groups where the type has a layout, the
    /// file pages it came from released (every later read goes to the repacked copy).
    /// `on_chunk` is told the source bytes of each finished chunk (from the repacking
    /// threads). Whether it was repacked.
    pub(super) fn repack(&mut self, gguf: &GgufFile, on_chunk: &(dyn Fn(usize) + Sync)) -> bool {
        let w = self.matrix(gguf);
        let done = |bytes: &[u8]| {
            release_pages(bytes);
            on_chunk(bytes.len());
        };
        match MatmulPlan::for_matrix(kernels::backend(), &w, &done) {
            Ok(plan) if plan.packed().is_some() => {
                self.plan = plan;
                // The pages that straddled two chunks.
                release_pages(w.data);
                true
            }
            _ => false,
        }
    }

    /// Uses `p`, a repacked copy of this matrix (from the repack cache).
    pub(super) fn use_packed(&mut self, p: Arc<dyn PackedWeights>) {
        self.plan = MatmulPlan::repacked(kernels::backend(), p);
    }

    /// The bytes its matmul reads: the repacked copy's arrays, or its bytes in the file.
    pub fn resident_bytes<'a>(&'a self, gguf: &'a GgufFile) -> Vec<&'a [u8]> {
        match self.packed() {
            Some(p) => p.arrays(),
            None => vec![self.matrix(gguf).data],
        }
    }

    /// Replaces the matrix by a repacked Q4_0 copy, for a draft model's
    /// output head: a draft's guesses need its ranking of the tokens, not its precision (the
    /// target checks every guess), and the head is a third of what a small model streams per
    /// token. False, and nothing changed, for a matrix of at most Q4_0's 4.5 bits a weight, or
    /// where Q4_0 is not repacked (aarch64, `KOLIBRI_REPACK=0`).
    pub fn requantize_to_q4_0(&mut self, gguf: &GgufFile) -> bool {
        // Bytes per weight above Q4_0's 18 per 32.
        let wider = self.ty.type_size() * 32 > 18 * self.ty.block_size();
        if !wider || !MatmulPlan::would_repack(GgmlType::Q4_0, self.k) {
            return false;
        }
        let row_len = self.k / 32 * GgmlType::Q4_0.type_size();
        let mut bytes = vec![0u8; self.rows * row_len];
        const ROWS_PER_TASK: usize = 256;
        let this = &*self;
        bytes
            .par_chunks_mut(row_len * ROWS_PER_TASK)
            .enumerate()
            .for_each(|(c, rows)| {
                let mut x = vec![0f32; this.k];
                for (i, out) in rows.chunks_exact_mut(row_len).enumerate() {
                    this.dequantize_row_into(gguf, c * ROWS_PER_TASK + i, &mut x);
                    quantize_row(GgmlType::Q4_0, &x, out).expect("Q4_0 rows of whole blocks");
                }
            });
        let Some(packed) = kernels::repack(GgmlType::Q4_0, &bytes, self.rows, self.k, &|_| {})
        else {
            return false;
        };
        self.use_packed(packed);
        // Reads go to the packed copy from now on: the file range is this tensor's no more.
        (self.ty, self.len) = (GgmlType::Q4_0, bytes.len());
        true
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.len / self.rows
    }

    /// Dequantizes row `r` into `out` (length `k`); used for embedding lookups.
    pub fn dequantize_row_into(&self, gguf: &GgufFile, r: usize, out: &mut [f32]) {
        if let Some(p) = self.packed() {
            return p.dequantize_row(r, out);
        }
        let rb = self.row_bytes();
        let bytes = &gguf.file_bytes()[self.start + r * rb..self.start + (r + 1) * rb];
        dequantize_row(self.ty, bytes, out).expect("type checked at load");
    }
}

/// Tensors bigger than this report progress while they repack, not only when done.
const REPORT_WITHIN: usize = 16 << 20;

/// [`Linear::repack`] with progress: `done` bytes were repacked before this tensor. A big
/// tensor repacks on a helper thread while this one reports the chunks finished so far, so the
/// callback keeps running on the loading thread. Cancelling takes effect after the tensor.
pub(super) fn repack_reporting(
    lin: &mut Linear,
    gguf: &GgufFile,
    done: usize,
    progress: RepackProgress,
) -> Result<bool, ModelError> {
    let repacked = if lin.len < REPORT_WITHIN {
        lin.repack(gguf, &|_| {})
    } else {
        repack_polling(lin, gguf, done, progress)?
    };
    if repacked {
        progress(done + lin.len)?;
    }
    Ok(repacked)
}

/// [`Linear::repack`] on a helper thread while this one reports the finished chunks.
fn repack_polling(
    lin: &mut Linear,
    gguf: &GgufFile,
    done: usize,
    progress: RepackProgress,
) -> Result<bool, ModelError> {
    let chunks = std::sync::atomic::AtomicUsize::new(0);
    let count = |n: usize| {
        chunks.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    };
    let loader = std::thread::current();
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let repacked = lin.repack(gguf, &count);
            loader.unpark(); // no waiting out the last poll interval
            repacked
        });
        let mut result = Ok(());
        while !worker.is_finished() {
            std::thread::park_timeout(std::time::Duration::from_millis(10));
            if result.is_ok() {
                result = progress(done + chunks.load(std::sync::atomic::Ordering::Relaxed));
            }
        }
        // A panic in the repack is a bug; let it surface as one.
        let repacked = worker
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        result.map(|()| repacked)
    })
}
