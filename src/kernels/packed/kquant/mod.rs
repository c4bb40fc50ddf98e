//! The generic K-quant 8-row layouts: a type describes one (8-row group, 256-quant block) of
//! its repacked weights through [`KQuant`] (how a file block goes in, each quant, scale and
//! min) and its per-instruction-set unpacking ([`avx2::KQuantAvx2`], [`avx512::KQuantAvx512`]);
//! the scalar twin, the vector kernels and the AMX tiles here are then its kernels.
//!
//! Every such block reads as unsigned quants `u` in "registers" (register `k` holds quants
//! `4k..4k + 4` of each row, see [`super`]), an integer scale per sub-block of [`KQuant::SUB`]
//! quants, and either a min per sub-block (`w = d · sc · u − dmin · m`, [`KQuant::MINS`]) or a
//! fixed offset (`w = d · sc · (u − OFFSET)`). Per block and (row, token) the kernels form
//!
//! - `isum = Σ_s sc_s · Σ_{p ∈ s} u_p · a_p`, exact in i32;
//! - `corr = Σ_s coef_s · A_s`, with `A_s` the activations' sum over sub-block `s` (from the
//!   Q8_K block sums) and `coef` the min or the scale;
//! - mins: `acc += (d · dy) · isum − (dmin · dy) · corr`; offset: `acc += (d · dy) · (isum −
//!   OFFSET · corr)`,
//!
//! the same integers as the type's scalar dot and the same f32 steps on every path, so the AVX2,
//! AVX-512 and AMX kernels agree bit for bit.

#[cfg(target_arch = "x86_64")]
pub mod amx;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;

use half::f16;

use super::{GroupBlock, Grouped, PackedKernels, Zeroable, GROUP};
use crate::kernels::cpu::CpuPath;
use crate::kernels::types::WeightType;
use crate::quant::blocks::BlockQ8K;
use crate::quant::types::QK_K;

/// One (8-row group, 256-quant block) of a generic K-quant layout.
pub(crate) trait KQuant: Zeroable + Send + Sync + 'static {
    /// The weight type whose blocks it holds.
    type File: WeightType<Act = BlockQ8K>;
    /// Quants per scale: 16 or 32.
    const SUB: usize;
    /// Whether sub-blocks have mins (else the quants carry [`KQuant::OFFSET`]).
    const MINS: bool;
    /// What the unsigned quants of [`KQuant::quant`] carry above their value.
    const OFFSET: i32;
    /// Widest vector call in tokens.
    const WIDTH: usize;

    /// Writes file block `x` as row `r`.
    fn put_row(&mut self, r: usize, x: &<Self::File as WeightType>::Block);
    /// Quant `p` (0..256) of row `r`, unsigned.
    fn quant(&self, r: usize, p: usize) -> u8;
    /// The scale of sub-block `s` of row `r`.
    fn scale(&self, r: usize, s: usize) -> i32;
    /// The min of sub-block `s` of row `r` (types with mins).
    fn min(&self, _r: usize, _s: usize) -> i32 {
        0
    }
    /// The rows' super-block scales.
    fn d(&self) -> &[f16; GROUP];
    /// The rows' min scales (types with mins).
    fn dmin(&self) -> &[f16; GROUP] {
        self.d()
    }
    /// The kernels on `path`.
    fn kernels(path: CpuPath) -> &'static PackedKernels<Grouped<Self>>;
}

/// Sub-blocks of a 256-quant block.
pub(crate) const fn subs<S: KQuant>() -> usize {
    QK_K / S::SUB
}

/// The min (types with mins) or the scale of sub-block `s` of row `r`: what the activation
/// sums are multiplied by.
fn coef<S: KQuant>(x: &S, r: usize, s: usize) -> i32 {
    if S::MINS {
        x.min(r, s)
    } else {
        x.scale(r, s)
    }
}

impl<S: KQuant> GroupBlock for S {
    type File = S::File;

    fn put_row(&mut self, r: usize, x: &<S::File as WeightType>::Block) {
        KQuant::put_row(self, r, x)
    }

    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let (d, dmin) = (self.d()[r].to_f32(), self.dmin()[r].to_f32());
        for (p, o) in out.iter_mut().enumerate().take(QK_K) {
            let (s, u) = (p / S::SUB, self.quant(r, p) as i32);
            *o = if S::MINS {
                d * self.scale(r, s) as f32 * u as f32 - dmin * self.min(r, s) as f32
            } else {
                d * self.scale(r, s) as f32 * (u - S::OFFSET) as f32
            };
        }
    }

    /// The scalar twin: the integers and f32 steps of the module docs.
    fn dot_row(&self, y: &BlockQ8K, r: usize) -> f32 {
        let mut isum = 0i32;
        let mut corr = 0i32;
        for s in 0..subs::<S>() {
            let ps = S::SUB * s..S::SUB * (s + 1);
            let dot: i32 = ps.map(|p| self.quant(r, p) as i32 * y.qs[p] as i32).sum();
            isum += self.scale(r, s) * dot;
            let sums = &y.bsums[S::SUB / 16 * s..S::SUB / 16 * (s + 1)];
            corr += coef(self, r, s) * sums.iter().map(|&v| v as i32).sum::<i32>();
        }
        let (d, dmin) = (self.d()[r].to_f32() * y.d, self.dmin()[r].to_f32() * y.d);
        if S::MINS {
            d * isum as f32 - dmin * corr as f32
        } else {
            d * (isum - S::OFFSET * corr) as f32
        }
    }

    fn kernels(path: CpuPath) -> &'static PackedKernels<Grouped<S>> {
        S::kernels(path)
    }
}

/// Row `r`'s 4 bytes of register line `line`: bytes `4r..4r + 4`.
#[inline]
pub(crate) fn put_word(line: &mut super::Line32, r: usize, v: u32) {
    line.0[4 * r..4 * r + 4].copy_from_slice(&v.to_le_bytes());
}

/// The word of register `k`'s 4 quants `[q(4k), .., q(4k + 3)]` of a 256-quant row, from a
/// function giving each quant.
#[inline]
pub(crate) fn register_word(k: usize, q: impl Fn(usize) -> u8) -> u32 {
    u32::from_le_bytes([q(4 * k), q(4 * k + 1), q(4 * k + 2), q(4 * k + 3)])
}

/// Test helper: the layout `S` puts random file blocks where its accessors read them back:
/// every quant, scale and min of every row against the file block's dequantization.
#[cfg(test)]
pub(crate) fn check_layout<S: KQuant>(seed: u64) {
    let mut bits = crate::kernels::types::test_bits(seed);
    let rows = S::File::random_blocks(GROUP, &mut bits);
    // SAFETY: `Zeroable` promises all-zero is a valid `S`.
    let mut g: S = unsafe { std::mem::zeroed() };
    for (r, x) in rows.iter().enumerate() {
        KQuant::put_row(&mut g, r, x);
    }
    for (r, x) in rows.iter().enumerate() {
        let (mut want, mut got) = ([0f32; QK_K], [0f32; QK_K]);
        S::File::dequantize(x, &mut want);
        GroupBlock::dequantize_row(&g, r, &mut got);
        for p in 0..QK_K {
            assert_eq!(got[p].to_bits(), want[p].to_bits(), "row {r} quant {p}");
        }
    }
}

/// `fn kernels(path)` of [`KQuant`] for block type `$S`: the generic kernels of [`avx2`],
/// [`avx512`] and [`amx`] on x86 (where `$S` has their unpacking), the scalar twin elsewhere.
macro_rules! kquant_kernels {
    ($S:ty) => {
        $crate::kernels::packed::generic_kernels!(
            $S,
            $crate::kernels::packed::Grouped<$S>,
            kquant,
            act: $crate::quant::blocks::BlockQ8K,
            side: $crate::kernels::activations::Q8KSide,
            width: <$S as $crate::kernels::packed::kquant::KQuant>::WIDTH,
            pair_min: 1,
            tiles: Some(
                $crate::kernels::packed::amx::kquant::matmul_pairs::<
                    $crate::kernels::packed::Grouped<$S>,
                >,
            ),
        );
    };
}
pub(crate) use kquant_kernels;
