//! The object-safe faces of the layouts: [`PackedWeights`] is a repacked matrix as the plan
//! holds it, [`LayoutKind`] a layout as the type registry lists it.

use std::marker::PhantomData;
use std::sync::Arc;

use super::{Layout, Release};
use crate::kernels::activations::{ActElem, QuantizedActivations};
use crate::kernels::cpu::CpuPath;
use crate::kernels::plan::packed;
use crate::kernels::types::WeightType;
use crate::kernels::KernelError;
use crate::quant::blocks::block_bytes;
use crate::quant::GgmlType;

/// A matrix repacked into one of the 8-row layouts.
pub trait PackedWeights: Send + Sync {
    fn ty(&self) -> GgmlType;
    fn rows(&self) -> usize;
    fn k(&self) -> usize;
    /// The arrays behind the matrix as bytes (what a repack cache stores).
    fn arrays(&self) -> Vec<&[u8]>;
    /// Row `r` as f32.
    fn dequantize_row(&self, r: usize, out: &mut [f32]);
    /// `out[t * rows + r] = W[r] · x[t]` with `path`'s kernels.
    fn matmul(
        &self,
        path: CpuPath,
        act: &QuantizedActivations,
        out: &mut [f32],
    ) -> Result<(), KernelError>;
    /// What runs on `path`, in words.
    fn describe(&self, path: CpuPath) -> String;
}

impl std::fmt::Debug for dyn PackedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x8 {{ rows: {}, k: {} }}",
            self.ty(),
            self.rows(),
            self.k()
        )
    }
}

impl<L: Layout> PackedWeights for L {
    fn ty(&self) -> GgmlType {
        L::TYPE
    }
    fn rows(&self) -> usize {
        self.shape().0
    }
    fn k(&self) -> usize {
        self.shape().1
    }
    fn arrays(&self) -> Vec<&[u8]> {
        Layout::arrays(self)
    }
    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        Layout::dequantize_row(self, r, out)
    }
    fn matmul(
        &self,
        path: CpuPath,
        act: &QuantizedActivations,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        packed::run(self, L::kernels(path), act, out)
    }
    fn describe(&self, path: CpuPath) -> String {
        packed::describe(L::kernels(path))
    }
}

/// A layout as the registry lists it: repacking and mapping by weight type.
pub trait LayoutKind: Sync {
    /// Whether rows of `k` weights have this layout (whole blocks).
    fn fits(&self, k: usize) -> bool;
    /// `rows` × `k` weights repacked from their file bytes; `None` if the bytes do not fit.
    fn repack(
        &self,
        data: &[u8],
        rows: usize,
        k: usize,
        done: &Release<'_>,
    ) -> Option<Arc<dyn PackedWeights>>;
    /// A matrix over a repack cache's arrays (see [`Layout::from_mapped`]).
    #[allow(clippy::wrong_self_convention)] // a constructor the registry entry dispatches
    fn from_mapped(
        &self,
        rows: usize,
        k: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Arc<dyn PackedWeights>>;
    /// What runs on `path` for a matrix in this layout, in words.
    fn describe(&self, path: CpuPath) -> String;
    /// The kernels of `path` against the scalar twin on a small random matrix.
    fn self_test(&self, path: CpuPath) -> Result<(), String>;
}

/// The [`LayoutKind`] of layout `L`.
pub struct LayoutOf<L>(PhantomData<fn() -> L>);

impl<L> LayoutOf<L> {
    pub const fn new() -> LayoutOf<L> {
        LayoutOf(PhantomData)
    }
}

impl<L: Layout> LayoutKind for LayoutOf<L> {
    fn fits(&self, k: usize) -> bool {
        k > 0 && k.is_multiple_of(L::Act::FORMAT.block_len())
    }

    fn repack(
        &self,
        data: &[u8],
        rows: usize,
        k: usize,
        done: &Release<'_>,
    ) -> Option<Arc<dyn PackedWeights>> {
        if !self.fits(k) {
            return None;
        }
        Some(Arc::new(L::repack(data, rows, k, done)?))
    }

    fn from_mapped(
        &self,
        rows: usize,
        k: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Arc<dyn PackedWeights>> {
        if rows == 0 || !self.fits(k) {
            return None;
        }
        Some(Arc::new(L::from_mapped(rows, k, map, offsets)?))
    }

    fn describe(&self, path: CpuPath) -> String {
        packed::describe(L::kernels(path))
    }

    fn self_test(&self, path: CpuPath) -> Result<(), String> {
        // Three groups (a pair and a lone group), three 256-quant blocks per row; tokens
        // past one AMX tile and past the widest vector call.
        let (rows, k, n) = (3 * super::GROUP, 768, 17);
        let mut bits = crate::kernels::types::test_bits(0x9e37_79b9_7f4a_7c15);
        let blocks = L::File::random_blocks(rows * k / L::File::BLOCK_LEN, &mut bits);
        let w = L::repack(block_bytes(&blocks), rows, k, &|_| {}).ok_or("repack failed")?;
        let x: Vec<f32> = (0..n * k)
            .map(|_| (bits() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect();
        let act = QuantizedActivations::from_elems(L::Act::quantize(&x), n, k, true);
        let (mut got, mut want) = (vec![0f32; rows * n], vec![0f32; rows * n]);
        packed::run(&w, L::kernels(path), &act, &mut got).map_err(|e| e.to_string())?;
        packed::run(&w, L::kernels(CpuPath::Scalar), &act, &mut want).map_err(|e| e.to_string())?;
        crate::kernels::types::compare(&format!("{}x8", L::TYPE), &got, &want)
    }
}
