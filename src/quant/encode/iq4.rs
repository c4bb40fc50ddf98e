//! IQ4_NL and IQ4_XS: 4-bit indices into the non-linear codebook [`KVALUES_IQ4NL`], each
//! group of 32 with the scale that minimises the x²-weighted error over 15 candidate scales.

use half::f16;

use super::fit::GROUP_MAX_EPS;
use super::nearest_int;
use crate::quant::blocks::{BlockIQ4NL, BlockIQ4XS, KVALUES_IQ4NL};

/// Candidate scales on each side of the first guess.
const TRIES: i32 = 7;

/// The codebook index nearest `v` (the upper one on a tie).
fn nearest_index(v: f32) -> u8 {
    let k = &KVALUES_IQ4NL;
    if v <= k[0] as f32 {
        return 0;
    }
    if v >= k[15] as f32 {
        return 15;
    }
    let (mut lo, mut hi) = (0usize, 15usize);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if v < k[mid] as f32 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    if v - (k[hi - 1] as f32) < (k[hi] as f32) - v {
        (hi - 1) as u8
    } else {
        hi as u8
    }
}

/// The weighted sums of `x` against its codebook values at inverse scale `id`.
fn sums(x: &[f32; 32], id: f32) -> (f32, f32) {
    x.iter().fold((0.0f32, 0.0f32), |(sqx, sq2), &v| {
        let q = KVALUES_IQ4NL[nearest_index(id * v) as usize] as f32;
        let w = v * v;
        (sqx + w * q * v, sq2 + w * q * q)
    })
}

/// The best scale for one group of 32 (0 for an all-but-zero group).
fn group_scale(x: &[f32; 32]) -> f32 {
    let max = super::legacy::signed_max(x);
    if max.abs() < GROUP_MAX_EPS {
        return 0.0;
    }
    let k0 = KVALUES_IQ4NL[0] as f32;
    let (sqx, sq2) = sums(x, 1.0 / (-max / k0));
    let mut d = sqx / sq2;
    let mut best = d * sqx;
    for t in -TRIES..=TRIES {
        let (sqx, sq2) = sums(x, (t as f32 + k0) / max);
        if sq2 > 0.0 && sqx * sqx > best * sq2 {
            d = sqx / sq2;
            best = d * sqx;
        }
    }
    d
}

fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// Indices of 32 weights at scale `d`, packed as IQ4_NL packs them (j and j + 16 in byte j).
fn pack(x: &[f32], d: f32) -> [u8; 16] {
    let id = inverse(d);
    std::array::from_fn(|j| nearest_index(id * x[j]) | (nearest_index(id * x[j + 16]) << 4))
}

pub(super) fn iq4_nl(x: &[f32; 32]) -> BlockIQ4NL {
    // The indices come from the scale before its f16 rounding, as in the reference.
    let d = group_scale(x);
    BlockIQ4NL {
        d: f16::from_f32(d),
        qs: pack(x, d),
    }
}

/// Eight groups' scales quantized to 6 bits against `-max / 32`, then each group's indices
/// chosen again on its stored scale.
pub(super) fn iq4_xs(x: &[f32; 256]) -> BlockIQ4XS {
    let mut scales = [0f32; 8];
    for (s, xg) in scales.iter_mut().zip(x.chunks_exact(32)) {
        *s = group_scale(xg.try_into().expect("32 weights"));
    }
    let d = -super::legacy::signed_max(&scales) / 32.0;
    let dh = f16::from_f32(d);
    let id = inverse(d);
    let mut block = BlockIQ4XS {
        d: dh,
        scales_h: 0,
        scales_l: [0; 4],
        qs: [0; 128],
    };
    for (i, (xg, qs)) in x
        .chunks_exact(32)
        .zip(block.qs.chunks_exact_mut(16))
        .enumerate()
    {
        let l = nearest_int(id * scales[i]).clamp(-32, 31);
        qs.copy_from_slice(&pack(xg, d * l as f32));
        let l = (l + 32) as u16;
        block.scales_l[i / 2] |= ((l & 0x0F) as u8) << (4 * (i % 2));
        block.scales_h |= (l >> 4) << (2 * i);
    }
    block
}
