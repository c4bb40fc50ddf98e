//! A registry entry: the object-safe face of a [`WeightType`], and the type's self-test.

use std::marker::PhantomData;

use super::{Dense, TileSet, WeightType, TILE_TOKENS};
use crate::kernels::activations::{ActElem, ActFormat};
use crate::kernels::cpu::CpuPath;
use crate::kernels::packed::LayoutKind;
use crate::kernels::plan::dense::DenseRun;
use crate::quant::GgmlType;

/// A weight type as the registry lists it.
pub trait Kind: Sync {
    fn ty(&self) -> GgmlType;
    /// The activation format its kernels read.
    fn act_format(&self) -> ActFormat;
    /// Its kernels for weights used in place on `path`.
    fn dense(&self, path: CpuPath) -> &'static dyn DenseRun;
    /// What runs for weights in place on `path`, in words.
    fn describe_dense(&self, path: CpuPath) -> String;
    /// The 8-row repacked layout, where the type has one.
    fn layout(&self) -> Option<&'static dyn LayoutKind>;
    /// `out.len()` weights from their file bytes (whole blocks); `None` if the lengths do not
    /// fit.
    fn dequantize(&self, bytes: &[u8], out: &mut [f32]) -> Option<()>;
    /// Every kernel of `path` for this type (dot, tiles, the layout's) against the scalar
    /// twins on small random inputs; `Err` names the first that disagrees.
    fn self_test(&self, path: CpuPath) -> Result<(), String>;
}

struct Entry<T>(PhantomData<fn() -> T>);

/// The registry entry of `T`.
pub(super) const fn of<T: WeightType>() -> &'static dyn Kind {
    &Entry::<T>(PhantomData)
}

impl<T: WeightType> Kind for Entry<T> {
    fn ty(&self) -> GgmlType {
        T::TYPE
    }

    fn act_format(&self) -> ActFormat {
        T::Act::FORMAT
    }

    fn dense(&self, path: CpuPath) -> &'static dyn DenseRun {
        T::dense(path)
    }

    fn describe_dense(&self, path: CpuPath) -> String {
        describe(T::dense(path), T::Act::FORMAT)
    }

    fn layout(&self) -> Option<&'static dyn LayoutKind> {
        T::layout()
    }

    fn dequantize(&self, bytes: &[u8], out: &mut [f32]) -> Option<()> {
        let size = std::mem::size_of::<T::Block>();
        if !bytes.len().is_multiple_of(size) || out.len() != bytes.len() / size * T::BLOCK_LEN {
            return None;
        }
        for (b, o) in bytes
            .chunks_exact(size)
            .zip(out.chunks_exact_mut(T::BLOCK_LEN))
        {
            T::dequantize(&crate::quant::blocks::read_block(b)?, o);
        }
        Some(())
    }

    fn self_test(&self, path: CpuPath) -> Result<(), String> {
        test_dense::<T>(path)?;
        match T::layout() {
            Some(layout) => layout.self_test(path),
            None => Ok(()),
        }
    }
}

/// "activations q8_0; 1 token: avx512 dot; batches: avx2 1-row x 8-token tiles".
fn describe<W, A>(d: &Dense<W, A>, act: ActFormat) -> String {
    let batches = match d.tiles.rows() {
        0 => format!("{} dot per token", d.dot_isa),
        r => format!("{} {r}-row x {TILE_TOKENS}-token tiles", d.tiles_isa),
    };
    format!(
        "activations {}; 1 token: {} dot; batches: {batches}",
        act.name(),
        d.dot_isa
    )
}

/// A deterministic xorshift stream of random words.
pub(crate) fn test_bits(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// `Err` naming the first element of `got` more than f32 rounding of a long sum away from
/// `want` (NaN counts as a failure).
pub(crate) fn compare(name: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        if err.is_nan() || err > 5e-4 * w.abs().max(1.0) {
            return Err(format!("{name} [{i}]: {g} vs {w}"));
        }
    }
    Ok(())
}

/// `T`'s in-place kernels on `path` against its scalar dot: three 256-weight spans (so pair
/// loops see a tail), the dot and every (row, token) of each tile width.
fn test_dense<T: WeightType>(path: CpuPath) -> Result<(), String> {
    const N: usize = 3 * 256;
    let mut bits = test_bits(0x2545_f491_4f6c_dd1d);
    let x: Vec<f32> = (0..N)
        .map(|_| (bits() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect();
    let a = T::Act::quantize(&x);
    let w = T::random_blocks(N / T::BLOCK_LEN, &mut bits);
    let d = T::dense(path);
    let want = T::dot(&w, &a);
    // SAFETY: `path` is a backend's, which this CPU runs.
    let got = unsafe { (d.dot)(&w, &a) };
    let name = T::TYPE.to_string();
    compare(&name, &[got], &[want])?;
    let (w, a) = (&w[..], &a[..]);
    // SAFETY: as above.
    let tiles: Vec<f32> = unsafe {
        match &d.tiles {
            TileSet::None => Vec::new(),
            TileSet::Rows1(t) => [
                (t.mm)([w], [a; TILE_TOKENS]).as_flattened().to_vec(),
                (t.mm4)([w], [a; 4]).as_flattened().to_vec(),
                (t.mm2)([w], [a; 2]).as_flattened().to_vec(),
            ]
            .concat(),
            TileSet::Rows2(t) => [
                (t.mm)([w; 2], [a; TILE_TOKENS]).as_flattened().to_vec(),
                (t.mm4)([w; 2], [a; 4]).as_flattened().to_vec(),
                (t.mm2)([w; 2], [a; 2]).as_flattened().to_vec(),
            ]
            .concat(),
        }
    };
    compare(&format!("{name} tile"), &tiles, &vec![want; tiles.len()])
}

#[cfg(test)]
mod tests {
    use super::super::REGISTRY;
    use super::*;
    use crate::quant::dequant::dequantize_row;

    /// Every registered type's dequantization is the reference one of `quant::dequant`, bit
    /// for bit, on random blocks.
    #[test]
    fn dequantization_is_the_reference() {
        let mut bits = test_bits(7);
        for kind in REGISTRY {
            let ty = kind.ty();
            let n = 2 * 256;
            let row = ty.row_bytes(n as u64).unwrap() as usize;
            let bytes: Vec<u8> = (0..row).map(|_| (bits() >> 33) as u8).collect();
            let (mut got, mut want) = (vec![0f32; n], vec![0f32; n]);
            kind.dequantize(&bytes, &mut got).unwrap();
            dequantize_row(ty, &bytes, &mut want).unwrap();
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{ty}");
            assert!(kind.dequantize(&bytes[1..], &mut got).is_none(), "{ty}");
        }
    }
}
