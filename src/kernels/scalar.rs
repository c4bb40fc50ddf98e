//! Portable reference kernels. Integer accumulation follows llama.cpp's generic kernels: exact
//! per-block integer sums, scaled by `d_w * d_a` in f32. The SIMD kernels are tested against
//! these.

use half::{bf16, f16};

use crate::quant::blocks::*;

/// Unpacks the 12-byte 6-bit scale/min field of Q4_K/Q5_K: returns `(scales, mins)` of the
/// 8 sub-blocks. Bytes 0..4 / 4..8 hold sc[0..4] / m[0..4] in their low 6 bits; bytes 8..12
/// hold the low nibbles of sc[4..8] (low) and m[4..8] (high), whose top 2 bits sit in the top
/// bits of bytes 0..4 / 4..8. Done on 32-bit words since every kernel calls this once per
/// super-block.
#[inline(always)]
pub(crate) fn unpack_k4_scales(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let w0 = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let w1 = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    let w2 = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let sc_lo = w0 & LOW6;
    let m_lo = w1 & LOW6;
    let sc_hi = (w2 & LOW4) | (((w0 >> 6) & TOP2) << 4);
    let m_hi = ((w2 >> 4) & LOW4) | (((w1 >> 6) & TOP2) << 4);
    let join = |a: u32, b: u32| (a as u64 | (b as u64) << 32).to_le_bytes();
    (join(sc_lo, sc_hi), join(m_lo, m_hi))
}

/// Unpacks the 16 signed 6-bit scales of Q3_K (already offset by -32).
#[inline(always)]
pub(crate) fn unpack_q3k_scales(s: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let lo = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
        let hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        *o = ((lo | (hi << 4)) as i8) - 32;
    }
    out
}

/// Q4_0 weights × Q8_0 activations.
pub fn vec_dot_q4_0_q8_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..16 {
            let lo = (x.qs[j] & 0x0f) as i32 - 8;
            let hi = (x.qs[j] >> 4) as i32 - 8;
            sumi += lo * y.qs[j] as i32 + hi * y.qs[j + 16] as i32;
        }
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}

/// Q5_0 weights × Q8_0 activations.
pub fn vec_dot_q5_0_q8_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let qh = u32::from_le_bytes(x.qh);
        let mut sumi = 0i32;
        for j in 0..16 {
            let h0 = ((qh >> j) & 1) << 4;
            let h1 = ((qh >> (j + 16)) & 1) << 4;
            let lo = ((x.qs[j] & 0x0f) as u32 | h0) as i32 - 16;
            let hi = ((x.qs[j] >> 4) as u32 | h1) as i32 - 16;
            sumi += lo * y.qs[j] as i32 + hi * y.qs[j + 16] as i32;
        }
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}

/// Q8_0 weights × Q8_0 activations.
pub fn vec_dot_q8_0_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let sumi: i32 =
            x.qs.iter()
                .zip(&y.qs)
                .map(|(&p, &q)| p as i32 * q as i32)
                .sum();
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}

/// Q2_K weights × Q8_K activations.
pub fn vec_dot_q2_k_q8_k(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let summs: i32 = (0..16)
            .map(|j| y.bsums[j] as i32 * (x.scales[j] >> 4) as i32)
            .sum();
        let mut isum = 0i32;
        // Element 128*h + 32*s + l reads bits 2s..2s+2 of qs[32*h + l]; scale index 2*(4h+s) +
        // (l >= 16).
        for h in 0..2 {
            for s in 0..4 {
                for half in 0..2 {
                    let sc = (x.scales[8 * h + 2 * s + half] & 0x0f) as i32;
                    let mut acc = 0i32;
                    for l in 16 * half..16 * half + 16 {
                        let q = ((x.qs[32 * h + l] >> (2 * s)) & 3) as i32;
                        acc += q * y.qs[128 * h + 32 * s + l] as i32;
                    }
                    isum += sc * acc;
                }
            }
        }
        let dall = y.d * x.d.to_f32();
        let dmin = y.d * x.dmin.to_f32();
        sum += dall * isum as f32 - dmin * summs as f32;
    }
    sum
}

/// Q3_K weights × Q8_K activations.
pub fn vec_dot_q3_k_q8_k(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let scales = unpack_q3k_scales(&x.scales);
        let mut isum = 0i32;
        for h in 0..2 {
            for s in 0..4 {
                let bit = 1u8 << (4 * h + s);
                for half in 0..2 {
                    let mut acc = 0i32;
                    for l in 16 * half..16 * half + 16 {
                        let mut q = ((x.qs[32 * h + l] >> (2 * s)) & 3) as i32;
                        if x.hmask[l] & bit == 0 {
                            q -= 4;
                        }
                        acc += q * y.qs[128 * h + 32 * s + l] as i32;
                    }
                    isum += scales[8 * h + 2 * s + half] as i32 * acc;
                }
            }
        }
        sum += x.d.to_f32() * y.d * isum as f32;
    }
    sum
}

/// Q4_K weights × Q8_K activations.
pub fn vec_dot_q4_k_q8_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (sc, m) = unpack_k4_scales(&x.scales);
        let mut isum = 0i32;
        for j in 0..4 {
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let q = x.qs[32 * j + l];
                lo += (q & 0x0f) as i32 * y.qs[64 * j + l] as i32;
                hi += (q >> 4) as i32 * y.qs[64 * j + 32 + l] as i32;
            }
            isum += sc[2 * j] as i32 * lo + sc[2 * j + 1] as i32 * hi;
        }
        let summ: i32 = (0..16).map(|j| y.bsums[j] as i32 * m[j / 2] as i32).sum();
        sum += x.d.to_f32() * y.d * isum as f32 - x.dmin.to_f32() * y.d * summ as f32;
    }
    sum
}

/// Q5_K weights × Q8_K activations.
pub fn vec_dot_q5_k_q8_k(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (sc, m) = unpack_k4_scales(&x.scales);
        let mut isum = 0i32;
        for j in 0..4 {
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let q = x.qs[32 * j + l];
                let h = x.qh[l] >> (2 * j);
                let ql = (q & 0x0f) | ((h & 1) << 4);
                let qh = (q >> 4) | ((h & 2) << 3);
                lo += ql as i32 * y.qs[64 * j + l] as i32;
                hi += qh as i32 * y.qs[64 * j + 32 + l] as i32;
            }
            isum += sc[2 * j] as i32 * lo + sc[2 * j + 1] as i32 * hi;
        }
        let summ: i32 = (0..16).map(|j| y.bsums[j] as i32 * m[j / 2] as i32).sum();
        sum += x.d.to_f32() * y.d * isum as f32 - x.dmin.to_f32() * y.d * summ as f32;
    }
    sum
}

/// Q6_K weights × Q8_K activations.
pub fn vec_dot_q6_k_q8_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut isum = 0i32;
        for h in 0..2 {
            let ql = &x.ql[64 * h..64 * h + 64];
            let qh = &x.qh[32 * h..32 * h + 32];
            let q8 = &y.qs[128 * h..128 * h + 128];
            let mut acc = [0i32; 8];
            for l in 0..32 {
                let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                let g = l / 16;
                acc[g] += q1 * q8[l] as i32;
                acc[2 + g] += q2 * q8[l + 32] as i32;
                acc[4 + g] += q3 * q8[l + 64] as i32;
                acc[6 + g] += q4 * q8[l + 96] as i32;
            }
            for (g, &s) in acc.iter().enumerate() {
                isum += x.scales[8 * h + g] as i32 * s;
            }
        }
        sum += x.d.to_f32() * y.d * isum as f32;
    }
    sum
}

/// F16 weights × F16 activations; products in f32, sum in f64 like ggml's generic kernel.
pub fn vec_dot_f16_f16(w: &[f16], a: &[f16]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    w.iter()
        .zip(a)
        .map(|(x, y)| (x.to_f32() * y.to_f32()) as f64)
        .sum::<f64>() as f32
}

/// BF16 weights × BF16 activations.
pub fn vec_dot_bf16_bf16(w: &[bf16], a: &[bf16]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    w.iter()
        .zip(a)
        .map(|(x, y)| (x.to_f32() * y.to_f32()) as f64)
        .sum::<f64>() as f32
}

/// F32 × F32.
pub fn vec_dot_f32_f32(w: &[f32], a: &[f32]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    w.iter().zip(a).map(|(x, y)| (x * y) as f64).sum::<f64>() as f32
}

/// `out[g * stride + j] = q[g] · rows[j]` for the `d`-long queries packed in `q` and rows
/// packed in `rows`.
pub fn f32_dots(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    for (g, qg) in q.chunks_exact(d.max(1)).enumerate() {
        for (j, r) in rows.chunks_exact(d.max(1)).enumerate() {
            out[g * stride + j] = vec_dot_f32_f32(qg, r);
        }
    }
}

/// `acc[g] += sum_j w[g * stride + j] * rows[j]` for the `d`-long accumulators packed in `acc`,
/// row by row, each element fused (as the SIMD versions).
pub fn f32_weighted_sum(acc: &mut [f32], d: usize, rows: &[f32], w: &[f32], stride: usize) {
    for (g, a) in acc.chunks_exact_mut(d.max(1)).enumerate() {
        for (j, r) in rows.chunks_exact(d.max(1)).enumerate() {
            let wj = w[g * stride + j];
            for (a, x) in a.iter_mut().zip(r) {
                *a = x.mul_add(wj, *a);
            }
        }
    }
}

/// `acc[i] = f16(v[i] * w + acc[i])` with one rounding of the fused product-sum, as ggml's
/// `ggml_vec_mad_f16` (the value accumulation of its flash-attention kernel).
pub fn f16_mad(acc: &mut [f16], v: &[f16], w: f32) {
    for (a, x) in acc.iter_mut().zip(v) {
        *a = f16::from_f32(x.to_f32().mul_add(w, a.to_f32()));
    }
}

/// `q · k` with the f16 row `k` widened exactly: eight partial sums (sum `i` takes the
/// elements `≡ i (mod 8)`), each product rounded before its add (no fused multiply-add),
/// then the eight summed in order, then the tail's products. The SIMD twins reproduce it bit
/// for bit.
pub fn f16_dot(q: &[f32], k: &[f16]) -> f32 {
    let n = q.len().min(k.len());
    let body = n / 8 * 8;
    let mut acc = [0f32; 8];
    for (cq, ck) in q[..body].chunks_exact(8).zip(k[..body].chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += cq[i] * ck[i].to_f32();
        }
    }
    let tail: f32 = q[body..n]
        .iter()
        .zip(&k[body..n])
        .map(|(x, y)| x * y.to_f32())
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// `acc[i] = f16(acc[i] * s)`, as ggml's `ggml_vec_scale_f16`.
/// `dst[i] = src[i]` widened to f32 (exact).
pub fn f16_row_to_f32(src: &[f16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

pub fn f16_scale(acc: &mut [f16], s: f32) {
    for a in acc.iter_mut() {
        *a = f16::from_f32(a.to_f32() * s);
    }
}
