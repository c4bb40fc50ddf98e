//! The K-quants: 256-weight super-blocks of 16 or 32-weight groups, each group fitted on its
//! own (see [`super::fit`]), the groups' scales (and minimums) then quantized against one f16
//! super-scale, and the weights rounded again on the scales as stored.

use half::f16;

use super::fit::{fit_q3, fit_scale_min, fit_symmetric, Error, Grid, GROUP_MAX_EPS};
use super::{f16_round, nearest_int};
use crate::quant::blocks::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::quant::dequant::{get_scale_min_k4, unpack_q3_k_scales};

/// Per-group (scale, min) fits of the asymmetric types and their largest values.
struct Fits<const G: usize> {
    scales: [f32; G],
    mins: [f32; G],
}

impl<const G: usize> Fits<G> {
    fn max_scale(&self) -> f32 {
        self.scales
            .iter()
            .fold(0.0, |m, &s| if s > m { s } else { m })
    }
    fn max_min(&self) -> f32 {
        self.mins
            .iter()
            .fold(0.0, |m, &s| if s > m { s } else { m })
    }
}

/// Fits each group of `LEN` weights as `scale * q - min`, `q` in `0..=nmax`.
fn fit_groups<const G: usize, const LEN: usize>(
    x: &[f32; 256],
    nmax: i32,
    grid: &Grid,
    error: Error,
    weights: impl Fn(&[f32]) -> [f32; LEN],
    q: &mut [u8; 256],
) -> Fits<G> {
    let mut fits = Fits {
        scales: [0.0; G],
        mins: [0.0; G],
    };
    for (j, (xg, qg)) in x.chunks_exact(LEN).zip(q.chunks_exact_mut(LEN)).enumerate() {
        let w = weights(xg);
        (fits.scales[j], fits.mins[j]) = fit_scale_min(xg, &w, nmax, grid, error, qg);
    }
    fits
}

/// Q4_K/Q5_K group weights: `rms(x) + |x_i|`.
fn rms_plus_abs(x: &[f32]) -> [f32; 32] {
    let sum_x2 = x.iter().fold(0.0f32, |s, &v| s + v * v);
    let av = (sum_x2 / 32.0).sqrt();
    std::array::from_fn(|l| av + x[l].abs())
}

/// Rounds each weight again on its group's stored scale `d` and minimum `m` (`x ≈ d q - m`),
/// `q` in `0..=nmax`; a group whose stored scale is zero keeps its fitted quants.
fn requantize_asymmetric<const LEN: usize>(
    x: &[f32; 256],
    stored: impl Fn(usize) -> (f32, f32),
    nmax: i32,
    q: &mut [u8; 256],
) {
    for (j, (xg, qg)) in x.chunks_exact(LEN).zip(q.chunks_exact_mut(LEN)).enumerate() {
        let (d, dm) = stored(j);
        if d == 0.0 {
            continue;
        }
        for (o, &v) in qg.iter_mut().zip(xg) {
            *o = nearest_int((v + dm) / d).clamp(0, nmax) as u8;
        }
    }
}

/// As [`requantize_asymmetric`] for the symmetric types: `x ≈ d (q - offset)`, `q - offset`
/// in `-offset..offset`.
fn requantize_symmetric(
    x: &[f32; 256],
    stored: impl Fn(usize) -> f32,
    offset: i32,
    q: &mut [u8; 256],
) {
    for (j, (xg, qg)) in x.chunks_exact(16).zip(q.chunks_exact_mut(16)).enumerate() {
        let d = stored(j);
        if d == 0.0 {
            continue;
        }
        for (o, &v) in qg.iter_mut().zip(xg) {
            *o = (nearest_int(v / d).clamp(-offset, offset - 1) + offset) as u8;
        }
    }
}

/// Packs `BITS`-bit quants four (or two) to a byte: byte `l` of each 32-byte run holds quants
/// `l, l + 32, l + 64, ...` of its span of `32 * 8 / BITS`, lowest bits first.
fn pack_planes<const BITS: usize, const OUT: usize>(q: &[u8; 256]) -> [u8; OUT] {
    let per_byte = 8 / BITS;
    let mask = (1u8 << BITS) - 1;
    std::array::from_fn(|i| {
        let (run, l) = (i / 32, i % 32);
        (0..per_byte).fold(0u8, |b, k| {
            b | ((q[run * 32 * per_byte + l + 32 * k] & mask) << (BITS * k))
        })
    })
}

/// The 12-byte 6-bit scale/min field of Q4_K/Q5_K (the layout `get_scale_min_k4` reads).
fn pack_scale_mins(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..8 {
        if j < 4 {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4);
            s[j - 4] |= (ls[j] >> 4) << 6;
            s[j] |= (lm[j] >> 4) << 6;
        }
    }
    s
}

/// The Q4_K/Q5_K super-block header: scales and mins quantized to 6 bits against
/// `max / 63`. Returns (d, dmin, scales).
fn k4_header(fits: &Fits<8>) -> (f16, f16, [u8; 12]) {
    let (max_scale, max_min) = (fits.max_scale(), fits.max_min());
    let inv = |m: f32| if m > 0.0 { 63.0 / m } else { 0.0 };
    let (inv_scale, inv_min) = (inv(max_scale), inv(max_min));
    // `as u8` wraps a (never expected) negative fit as the reference's uint8_t does.
    let ls = fits
        .scales
        .map(|s| (nearest_int(inv_scale * s) as u8).min(63));
    let lm = fits.mins.map(|m| (nearest_int(inv_min * m) as u8).min(63));
    let scales = pack_scale_mins(&ls, &lm);
    (
        f16::from_f32(max_scale / 63.0),
        f16::from_f32(max_min / 63.0),
        scales,
    )
}

fn k4_quants(x: &[f32; 256], nmax: i32, grid: &Grid) -> (f16, f16, [u8; 12], [u8; 256]) {
    let mut q = [0u8; 256];
    let fits = fit_groups::<8, 32>(x, nmax, grid, Error::Squared, rms_plus_abs, &mut q);
    let (d, dmin, scales) = k4_header(&fits);
    let (df, dminf) = (d.to_f32(), dmin.to_f32());
    let stored = |j: usize| {
        let (sc, m) = get_scale_min_k4(j, &scales);
        (df * sc as f32, dminf * m as f32)
    };
    requantize_asymmetric::<32>(x, stored, nmax, &mut q);
    (d, dmin, scales, q)
}

pub(super) fn q4_k(x: &[f32; 256]) -> BlockQ4K {
    let grid = Grid {
        rmin: -1.0,
        rdelta: 0.1,
        steps: 20,
    };
    let (d, dmin, scales, q) = k4_quants(x, 15, &grid);
    BlockQ4K {
        d,
        dmin,
        scales,
        qs: pack_planes::<4, 128>(&q),
    }
}

pub(super) fn q5_k(x: &[f32; 256]) -> BlockQ5K {
    let grid = Grid {
        rmin: -0.5,
        rdelta: 0.1,
        steps: 15,
    };
    let (d, dmin, scales, q) = k4_quants(x, 31, &grid);
    // Bit 4 of quant `64 r + j` (`+ 32`) is bit `2r` (`2r + 1`) of qh[j].
    let qh =
        std::array::from_fn(|j| (0..8).fold(0u8, |h, b| h | (((q[32 * b + j] >> 4) & 1) << b)));
    BlockQ5K {
        d,
        dmin,
        scales,
        qh,
        qs: pack_planes::<4, 128>(&q),
    }
}

pub(super) fn q6_k(x: &[f32; 256]) -> BlockQ6K {
    let mut q = [0u8; 256];
    let mut scales = [0f32; 16];
    for (j, (xg, qg)) in x.chunks_exact(16).zip(q.chunks_exact_mut(16)).enumerate() {
        scales[j] = fit_symmetric(xg, 32, qg);
    }
    let max_scale = super::legacy::signed_max(&scales);
    if max_scale.abs() < GROUP_MAX_EPS {
        return BlockQ6K {
            ql: [0; 128],
            qh: [0; 64],
            scales: [0; 16],
            d: f16::ZERO,
        };
    }
    let iscale = -128.0 / max_scale;
    let (d, df) = f16_round(1.0 / iscale);
    let sc = scales.map(|s| nearest_int(iscale * s).min(127) as i8);
    requantize_symmetric(x, |j| df * sc[j] as f32, 32, &mut q);
    // ql: the low nibbles of quants 128h + l (+ 64) in byte 64h + l, high nibble 32 further;
    // qh: bits 4-5 of quants 128h + l + 32k at bits 2k of byte 32h + l.
    let ql = std::array::from_fn(|i| {
        let (h, l) = (i / 64, i % 64);
        (q[128 * h + l] & 0x0F) | ((q[128 * h + l + 64] & 0x0F) << 4)
    });
    let qh = std::array::from_fn(|i| {
        let (h, l) = (i / 32, i % 32);
        (0..4).fold(0u8, |b, k| b | ((q[128 * h + l + 32 * k] >> 4) << (2 * k)))
    });
    BlockQ6K {
        ql,
        qh,
        scales: sc,
        d,
    }
}

pub(super) fn q3_k(x: &[f32; 256]) -> BlockQ3K {
    let mut q = [0u8; 256];
    let mut scales = [0f32; 16];
    for (j, (xg, qg)) in x.chunks_exact(16).zip(q.chunks_exact_mut(16)).enumerate() {
        scales[j] = fit_q3(xg, 4, qg);
    }
    let max_scale = super::legacy::signed_max(&scales);
    let mut packed = [0u8; 12];
    let d = if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for (j, &s) in scales.iter().enumerate() {
            let l = (nearest_int(iscale * s) as i8).clamp(-32, 31) as i32 + 32;
            if j < 8 {
                packed[j] = (l & 0x0F) as u8;
            } else {
                packed[j - 8] |= ((l & 0x0F) << 4) as u8;
            }
            packed[8 + j % 4] |= ((l >> 4) << (2 * (j / 4))) as u8;
        }
        f16::from_f32(1.0 / iscale)
    } else {
        f16::ZERO
    };
    let (df, sc) = (d.to_f32(), unpack_q3_k_scales(&packed));
    requantize_symmetric(x, |j| df * sc[j] as f32, 4, &mut q);
    // Bit 2 of quant 32k + m is bit k of hmask[m]; the low two bits pack as Q2_K's.
    let hmask = std::array::from_fn(|m| (0..8).fold(0u8, |h, k| h | ((q[32 * k + m] >> 2) << k)));
    BlockQ3K {
        hmask,
        qs: pack_planes::<2, 64>(&q),
        scales: packed,
        d,
    }
}

pub(super) fn q2_k(x: &[f32; 256]) -> BlockQ2K {
    let grid = Grid {
        rmin: -0.5,
        rdelta: 0.1,
        steps: 15,
    };
    let mut q = [0u8; 256];
    let abs = |x: &[f32]| -> [f32; 16] { std::array::from_fn(|l| x[l].abs()) };
    let fits = fit_groups::<16, 16>(x, 3, &grid, Error::Absolute, abs, &mut q);
    let (max_scale, max_min) = (fits.max_scale(), fits.max_min());
    let mut scales = [0u8; 16];
    let mut d = f16::ZERO;
    if max_scale > 0.0 {
        let iscale = 15.0 / max_scale;
        for (s, &f) in scales.iter_mut().zip(&fits.scales) {
            *s = nearest_int(iscale * f) as u8;
        }
        d = f16::from_f32(max_scale / 15.0);
    }
    let mut dmin = f16::ZERO;
    if max_min > 0.0 {
        let iscale = 15.0 / max_min;
        for (s, &m) in scales.iter_mut().zip(&fits.mins) {
            *s |= (nearest_int(iscale * m) << 4) as u8;
        }
        dmin = f16::from_f32(max_min / 15.0);
    }
    let (df, dminf) = (d.to_f32(), dmin.to_f32());
    let stored = |j: usize| {
        (
            df * (scales[j] & 0x0F) as f32,
            dminf * (scales[j] >> 4) as f32,
        )
    };
    requantize_asymmetric::<16>(x, stored, 3, &mut q);
    BlockQ2K {
        scales,
        qs: pack_planes::<2, 64>(&q),
        d,
        dmin,
    }
}
