//! The 32-weight types: one f16 scale (and a minimum for the `_1` types) per block.

use half::f16;

use crate::quant::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0};

/// The element of largest magnitude, with its sign (the first of equal magnitudes).
pub(super) fn signed_max(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter()
        .fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// Symmetric `bits`-bit quants with the scale chosen so the largest magnitude maps to the
/// most negative quant: `q = min(2^bits - 1, trunc(x / d + 2^(bits-1) + 0.5))`.
fn symmetric<const BITS: u32>(x: &[f32; 32]) -> (f16, [u8; 32]) {
    let half = (1 << (BITS - 1)) as f32;
    let d = signed_max(x) / -half;
    let id = inverse(d);
    let top = (1u8 << BITS) - 1;
    // `as u8` of a value in [0.5, 2^bits + 0.5] truncates as the reference's int8 cast does.
    (
        f16::from_f32(d),
        x.map(|v| ((v * id + half + 0.5) as u8).min(top)),
    )
}

/// Asymmetric `bits`-bit quants over [min, max]: `q = trunc((x - min) / d + 0.5)`.
fn asymmetric<const BITS: u32>(x: &[f32; 32]) -> (f16, f16, [u8; 32]) {
    let (lo, hi) = min_max(x);
    let d = (hi - lo) / ((1u32 << BITS) - 1) as f32;
    let id = inverse(d);
    let top = (1u8 << BITS) - 1;
    let q = x.map(|v| (((v - lo) * id + 0.5) as u8).min(top));
    (f16::from_f32(d), f16::from_f32(lo), q)
}

/// Elements j and j + 16 share byte j: low nibble, high nibble.
fn pack_nibbles(q: &[u8; 32]) -> [u8; 16] {
    std::array::from_fn(|j| (q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4))
}

/// Bit 4 of quant j as bit j of the block's `qh` word.
fn pack_high_bits(q: &[u8; 32]) -> [u8; 4] {
    let qh = (0..32).fold(0u32, |h, j| h | (((q[j] >> 4) & 1) as u32) << j);
    qh.to_le_bytes()
}

pub(super) fn q4_0(x: &[f32; 32]) -> BlockQ4_0 {
    let (d, q) = symmetric::<4>(x);
    BlockQ4_0 {
        d,
        qs: pack_nibbles(&q),
    }
}

/// Q4_0 with the scale fitted: candidate roundings around the reference's, each with its
/// least-squares scale, the one of least squared error kept. Less error than the reference
/// (whose largest value always takes the extreme quant) at 21 roundings per block: for a KV
/// cache, written once per token.
pub(super) fn q4_0_fitted(x: &[f32; 32]) -> BlockQ4_0 {
    let max = signed_max(x);
    let mut best = (f32::INFINITY, 0.0f32, [8u8; 32]);
    if max != 0.0 {
        for step in -10..=10 {
            let id = -(8.0 + 0.1 * step as f32) / max;
            let l = x.map(|v| (v * id).round().clamp(-8.0, 7.0));
            let (xl, ll) =
                (x.iter().zip(&l)).fold((0.0, 0.0), |(xl, ll), (v, l)| (xl + v * l, ll + l * l));
            // The error of the best scale for these quants, less the constant Σ x².
            let err = -xl * xl / ll;
            if ll > 0.0 && err < best.0 {
                best = (err, xl / ll, l.map(|l| (l + 8.0) as u8));
            }
        }
    }
    BlockQ4_0 {
        d: f16::from_f32(best.1),
        qs: pack_nibbles(&best.2),
    }
}

pub(super) fn q4_1(x: &[f32; 32]) -> BlockQ4_1 {
    let (d, m, q) = asymmetric::<4>(x);
    BlockQ4_1 {
        d,
        m,
        qs: pack_nibbles(&q),
    }
}

pub(super) fn q5_0(x: &[f32; 32]) -> BlockQ5_0 {
    let (d, q) = symmetric::<5>(x);
    BlockQ5_0 {
        d,
        qh: pack_high_bits(&q),
        qs: pack_nibbles(&q),
    }
}

pub(super) fn q5_1(x: &[f32; 32]) -> BlockQ5_1 {
    let (d, m, q) = asymmetric::<5>(x);
    BlockQ5_1 {
        d,
        m,
        qh: pack_high_bits(&q),
        qs: pack_nibbles(&q),
    }
}

/// `d = amax / 127`, `q = round(x / d)` half away from zero.
pub(super) fn q8_0(x: &[f32; 32]) -> BlockQ8_0 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    BlockQ8_0 {
        d: f16::from_f32(d),
        qs: x.map(|v| (v * id).round() as i8),
    }
}
