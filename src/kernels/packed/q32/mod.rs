//! The generic 32-quant 8-row layouts (Q4_0, Q4_1, Q5_1, IQ4_NL): a type says how its file
//! block splits into 4- or 5-bit codes, a scale and perhaps a min ([`Q32`]), and how its
//! codes become bytes per instruction set ([`avx2::Q32Avx2`], [`avx512::Q32Avx512`]); the
//! layout, its scalar twin, the vector kernels and (types without mins) the AMX tiles here are
//! then its kernels.
//!
//! Storage per (group, block), no bigger than the 8 file blocks, in separate arrays so the
//! quant lines stay 32-byte aligned without padding:
//! - `qs`: 4 lines, line `m` holding registers `m` (low nibbles: quants `4m..4m + 4`) and
//!   `m + 4` (high nibbles: quants `16 + 4m..`), the file's bytes `4m..4m + 4` as they are;
//! - `qh` (5-bit codes): bit `k` of byte `i` is the fifth bit of register `k`'s byte `i`;
//! - `d` and `m` (types with mins): the 8 rows' f16 scales and mins.
//!
//! Per block and (row, token): `sumi = Σ u · a` exact in i32 with `u` the unsigned quant;
//! with mins `acc += (d · dy) · sumi + m · (dy · Σa)`, else `acc += (d · dy) · (sumi − OFFSET ·
//! Σa)`; `Σa` from the activations' [`Q8Side`].

#[cfg(target_arch = "x86_64")]
pub mod amx;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;

use std::marker::PhantomData;
use std::sync::Arc;

use half::f16;
use rayon::prelude::*;

use super::{
    as_bytes, chunk_groups, dequantize_by_blocks, Layout, Line32, PackedKernels, Release, Zeroed,
    GROUP,
};
use crate::kernels::activations::Q8Side;
use crate::kernels::cpu::CpuPath;
use crate::kernels::types::WeightType;
use crate::parallel::Disjoint;
use crate::quant::blocks::{cast_blocks, BlockQ8_0};
use crate::quant::GgmlType;

/// A 32-quant weight type in the generic layout.
pub(crate) trait Q32: Send + Sync + Sized + 'static {
    /// The weight type whose blocks it holds.
    type File: WeightType<Act = BlockQ8_0>;
    /// Whether codes have a fifth bit.
    const FIFTH_BIT: bool;
    /// Whether blocks have a min (`w = d · u + m`; else `w = d · (u − OFFSET)`).
    const MIN: bool;
    /// What the scalar twin's unsigned quants carry above their value.
    const OFFSET: i32;
    /// Widest vector call in tokens.
    const WIDTH: usize = 8;
    /// Tokens from which the AVX-512 two-group kernel runs (the AVX2 one below).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const PAIR_MIN: usize = 6;

    /// Whether every block's scale (and min) fits the layout's f16s exactly (else the matrix
    /// stays in place).
    fn packable(_w: &[<Self::File as WeightType>::Block]) -> bool {
        true
    }
    /// A file block's 32 codes (0..32), scale and min (zero without).
    fn split(x: &<Self::File as WeightType>::Block) -> ([u8; 32], f16, f16);
    /// The scalar twin's unsigned quant of code `c`.
    fn value(c: u8) -> u8 {
        c
    }
    /// The kernels on `path`.
    fn kernels(path: CpuPath) -> &'static PackedKernels<Q32x8<Self>>;
}

/// A 32-quant matrix of `rows` × `k` repacked into 8-row groups.
pub struct Q32x8<S> {
    pub rows: usize,
    pub k: usize,
    /// Blocks per row (`k / 32`).
    pub nb: usize,
    /// `[group][block][4]` nibble lines.
    pub qs: Zeroed<Line32>,
    /// `[group][block]` fifth-bit lines (5-bit codes only).
    pub qh: Zeroed<Line32>,
    /// `[group][block]` row scales.
    pub d: Zeroed<[f16; GROUP]>,
    /// `[group][block]` row mins (types with mins only).
    pub m: Zeroed<[f16; GROUP]>,
    _s: PhantomData<S>,
}

impl<S: Q32> Q32x8<S> {
    /// Arrays per block: (`qh`, `m`).
    fn per_block() -> (usize, usize) {
        (S::FIFTH_BIT as usize, S::MIN as usize)
    }

    /// Repacks `rows` rows of `w` (row-major, `k / 32` blocks per row), in parallel chunks of
    /// groups; `done` gets each chunk's source blocks once they are no longer needed.
    fn repack_blocks(
        w: &[<S::File as WeightType>::Block],
        rows: usize,
        k: usize,
        done: &Release<'_>,
    ) -> Q32x8<S> {
        let nb = k / 32;
        assert_eq!(w.len(), rows * nb, "block count != rows x k/32");
        let n = rows.div_ceil(GROUP) * nb;
        let (nh, nm) = Self::per_block();
        let mut qs = Zeroed::<Line32>::new(n * 4);
        let mut qh = Zeroed::<Line32>::new(n * nh);
        let mut d = Zeroed::<[f16; GROUP]>::new(n);
        let mut m = Zeroed::<[f16; GROUP]>::new(n * nm);
        let block_bytes = std::mem::size_of::<<S::File as WeightType>::Block>();
        let cg = chunk_groups(nb * GROUP * block_bytes);
        let groups = rows.div_ceil(GROUP);
        let arrays = (
            Disjoint::new(&mut qs),
            Disjoint::new(&mut qh),
            Disjoint::new(&mut d),
            Disjoint::new(&mut m),
        );
        (0..groups.div_ceil(cg)).into_par_iter().for_each(|c| {
            let (g0, g1) = (c * cg, ((c + 1) * cg).min(groups));
            let (b0, len) = (g0 * nb, (g1 - g0) * nb);
            // SAFETY: chunk `c`'s blocks of each array, disjoint from every other chunk's; the
            // arrays outlive the loop.
            let (qs, qh, d, m) = unsafe {
                (
                    arrays.0.slice(b0 * 4, len * 4),
                    arrays.1.slice(b0 * nh, len * nh),
                    arrays.2.slice(b0, len),
                    arrays.3.slice(b0 * nm, len * nm),
                )
            };
            let (r0, r1) = (g0 * GROUP, (g1 * GROUP).min(rows));
            for row in r0..r1 {
                let (gl, r) = ((row - r0) / GROUP, row % GROUP);
                for b in 0..nb {
                    let gb = gl * nb + b;
                    let (codes, scale, min) = S::split(&w[row * nb + b]);
                    d[gb][r] = scale;
                    if S::MIN {
                        m[gb][r] = min;
                    }
                    for (i, line) in qs[gb * 4..gb * 4 + 4].iter_mut().enumerate() {
                        let nibbles = |q: usize| codes[q] & 15 | (codes[q + 16] & 15) << 4;
                        let v = [0, 1, 2, 3].map(|j| nibbles(4 * i + j));
                        line.0[4 * r..4 * r + 4].copy_from_slice(&v);
                    }
                    if S::FIFTH_BIT {
                        let word = fifth_bits(&codes);
                        qh[gb].0[4 * r..4 * r + 4].copy_from_slice(&word.to_le_bytes());
                    }
                }
            }
            done(as_bytes(&w[r0 * nb..r1 * nb]));
        });
        Q32x8 {
            rows,
            k,
            nb,
            qs,
            qh,
            d,
            m,
            _s: PhantomData,
        }
    }

    /// The code of quant `i` (0..32) of row `r` of block `gb`.
    #[inline]
    fn code(&self, gb: usize, r: usize, i: usize) -> u8 {
        let (reg, byte) = (i / 4, 4 * r + i % 4);
        let nibble = (self.qs[gb * 4 + reg % 4].0[byte] >> (4 * (reg / 4))) & 15;
        match S::FIFTH_BIT {
            true => nibble | ((self.qh[gb].0[byte] >> reg) & 1) << 4,
            false => nibble,
        }
    }

    /// The row's min of block `gb` (zero without mins).
    #[inline]
    fn min(&self, gb: usize, r: usize) -> f32 {
        match S::MIN {
            true => self.m[gb][r].to_f32(),
            false => 0.0,
        }
    }

    /// The prefetch of block `gb`'s arrays.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(crate) fn prefetch_block(&self, gb: usize) {
        use super::prefetch::prefetch_ahead;
        prefetch_ahead(&self.qs[..], gb * 4, 4);
        if S::FIFTH_BIT {
            prefetch_ahead(&self.qh[..], gb, 1);
        }
        prefetch_ahead(&self.d[..], gb, 1);
        if S::MIN {
            prefetch_ahead(&self.m[..], gb, 1);
        }
    }
}

/// A row's 4 bytes of a fifth-bit line from its 32 codes: bit `k` of byte `j` is the fifth bit
/// of quant `4k + j` (register `k`'s byte `j`).
pub(crate) fn fifth_bits(codes: &[u8; 32]) -> u32 {
    let mut word = 0;
    for (i, c) in codes.iter().enumerate() {
        word |= (((c >> 4) & 1) as u32) << (8 * (i % 4) + i / 4);
    }
    word
}

impl<S: Q32> Layout for Q32x8<S> {
    const TYPE: GgmlType = <S::File as WeightType>::TYPE;
    type File = S::File;
    type Act = BlockQ8_0;

    fn shape(&self) -> (usize, usize, usize) {
        (self.rows, self.k, self.nb)
    }

    fn group_bytes(&self) -> usize {
        let (nh, nm) = Self::per_block();
        self.nb * (128 + 32 * nh + 16 * (1 + nm))
    }

    fn repack(data: &[u8], rows: usize, k: usize, done: &Release<'_>) -> Option<Q32x8<S>> {
        let w = cast_blocks(data).filter(|w: &&[_]| w.len() == rows * (k / 32))?;
        if !S::packable(w) {
            return None;
        }
        Some(Q32x8::repack_blocks(w, rows, k, done))
    }

    fn from_mapped(
        rows: usize,
        k: usize,
        map: &Arc<memmap2::Mmap>,
        offsets: &[usize],
    ) -> Option<Q32x8<S>> {
        let nb = k / 32;
        let n = rows.div_ceil(GROUP).checked_mul(nb)?;
        let (nh, nm) = Self::per_block();
        // The arrays of `arrays()`, in its order: qs, [qh], d, [m].
        let mut at = offsets.iter().copied();
        let qs = at.next()?;
        let qh = if nh > 0 { at.next()? } else { 0 };
        let d = at.next()?;
        let m = if nm > 0 { at.next()? } else { 0 };
        if at.next().is_some() {
            return None;
        }
        Some(Q32x8 {
            rows,
            k,
            nb,
            qs: Zeroed::mapped(map, qs, n.checked_mul(4)?)?,
            qh: Zeroed::mapped(map, qh, n * nh)?,
            d: Zeroed::mapped(map, d, n)?,
            m: Zeroed::mapped(map, m, n * nm)?,
            _s: PhantomData,
        })
    }

    fn arrays(&self) -> Vec<&[u8]> {
        let mut v = vec![self.qs.bytes()];
        if S::FIFTH_BIT {
            v.push(self.qh.bytes());
        }
        v.push(self.d.bytes());
        if S::MIN {
            v.push(self.m.bytes());
        }
        v
    }

    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        dequantize_by_blocks((self.nb, self.k), r, out, |g, b, rr, o| {
            let gb = g * self.nb + b;
            let d = self.d[gb][rr].to_f32();
            for (i, o) in o.iter_mut().enumerate().take(32) {
                let u = S::value(self.code(gb, rr, i)) as i32;
                *o = match S::MIN {
                    true => d * u as f32 + self.min(gb, rr),
                    false => d * (u - S::OFFSET) as f32,
                };
            }
        })
    }

    /// The scalar twin: the integers and f32 steps of the module docs.
    fn scalar_group(
        &self,
        g: usize,
        a: &[&[BlockQ8_0]],
        sides: &[&[Q8Side]],
        out: &mut [[f32; GROUP]],
    ) {
        for ((y, s), o) in a.iter().zip(sides).zip(out.iter_mut()) {
            let mut acc = [0f32; GROUP];
            for b in 0..self.nb {
                let (yb, gb) = (&y[b], g * self.nb + b);
                let (dy, suma) = (s[b].d, s[b].offset16 / 16);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let sumi: i32 = (0..32)
                        .map(|i| S::value(self.code(gb, r, i)) as i32 * yb.qs[i] as i32)
                        .sum();
                    let d = self.d[gb][r].to_f32() * dy;
                    *acc += match S::MIN {
                        true => sumi as f32 * d + self.min(gb, r) * (dy * suma as f32),
                        false => (sumi - S::OFFSET * suma) as f32 * d,
                    };
                }
            }
            *o = acc;
        }
    }

    fn kernels(path: CpuPath) -> &'static PackedKernels<Q32x8<S>> {
        S::kernels(path)
    }
}

/// `fn kernels(path)` of [`Q32`] for type `$S`: the generic kernels of [`avx2`], [`avx512`]
/// and (types without mins) [`amx`] on x86, the scalar twin elsewhere.
macro_rules! q32_kernels {
    ($S:ty) => {
        $crate::kernels::packed::generic_kernels!(
            $S,
            $crate::kernels::packed::q32::Q32x8<$S>,
            q32,
            act: $crate::quant::blocks::BlockQ8_0,
            side: $crate::kernels::activations::Q8Side,
            width: <$S as $crate::kernels::packed::q32::Q32>::WIDTH,
            pair_min: <$S as $crate::kernels::packed::q32::Q32>::PAIR_MIN,
            tiles: if <$S as $crate::kernels::packed::q32::Q32>::MIN {
                None
            } else {
                Some(
                    $crate::kernels::packed::amx::blocks32::matmul_pairs::<
                        $crate::kernels::packed::q32::Q32x8<$S>,
                    >,
                )
            },
        );
    };
}
pub(crate) use q32_kernels;
