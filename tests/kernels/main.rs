//! Kernel tests: every SIMD path against the scalar twin (through the public matmul, so the
//! dispatch tables and tiling are covered too), the scalar kernels against an independent
//! dequantize-then-dot reference, the backends' other ops, path selection and error reporting.

mod matmul;
mod ops;
mod packed;
mod paths;

use half::{bf16, f16};
use kolibri::kernels::{self, Backend, CpuPath, QuantizedActivations, WeightMatrix};
use kolibri::quant::activation::{quantize_row_q8_0, quantize_row_q8_k};
use kolibri::quant::{BlockQ8K, BlockQ8_0, GgmlType, QK_K};

pub struct Rng(pub u64);

impl Rng {
    pub fn bits(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn f(&mut self) -> f32 {
        (self.bits() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn floats(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f() * scale).collect()
    }
}

/// A buffer whose slice `[off..off+len]` is aligned to 4 bytes, so block casts succeed.
pub struct Aligned {
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let buf = vec![0u8; len + 4];
        let off = (4 - buf.as_ptr() as usize % 4) % 4;
        Aligned { buf, off, len }
    }
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

fn put_f16(b: &mut [u8], at: usize, v: f32) {
    b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

fn get_f16(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Random weights of `ty`: random bytes with finite scale fields (f16 d / dmin at their
/// ggml offsets) and finite float elements.
pub fn random_weights(ty: GgmlType, rows: usize, k: usize, rng: &mut Rng) -> Aligned {
    let (bs, ts) = ty.block_geometry();
    let nblocks = rows * k / bs;
    let mut a = Aligned::new(nblocks * ts);
    let b = a.bytes_mut();
    match ty {
        GgmlType::F32 => {
            for c in b.chunks_mut(4) {
                c.copy_from_slice(&rng.f().to_le_bytes());
            }
            return a;
        }
        GgmlType::F16 => {
            for c in b.chunks_mut(2) {
                c.copy_from_slice(&f16::from_f32(rng.f()).to_bits().to_le_bytes());
            }
            return a;
        }
        GgmlType::BF16 => {
            for c in b.chunks_mut(2) {
                c.copy_from_slice(&bf16::from_f32(rng.f()).to_bits().to_le_bytes());
            }
            return a;
        }
        _ => {}
    }
    for x in b.iter_mut() {
        *x = rng.bits() as u8;
    }
    if ty == GgmlType::MXFP4 {
        // E8M0 half scales 2^-18 .. 2^-3, inside what the 8-row layout's f16 holds.
        for blk in b.chunks_mut(ts) {
            blk[0] = 110 + (rng.bits() % 16) as u8;
        }
        return a;
    }
    // (offset of d, offset of dmin) in the block.
    let (d_at, dmin_at) = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::IQ4_NL => (0, None),
        GgmlType::IQ4_XS => (0, None),
        GgmlType::Q4_1 | GgmlType::Q5_1 => (0, Some(2)),
        GgmlType::Q2_K => (80, Some(82)),
        GgmlType::Q3_K => (108, None),
        GgmlType::Q4_K | GgmlType::Q5_K => (0, Some(2)),
        GgmlType::Q6_K => (208, None),
        _ => unreachable!("{ty}"),
    };
    for blk in b.chunks_mut(ts) {
        put_f16(blk, d_at, rng.f() * 0.05);
        if let Some(m) = dmin_at {
            put_f16(blk, m, rng.f() * 0.05);
        }
    }
    a
}

/// ggml's `kvalues_iq4nl`, written out independently of the crate's copy.
const IQ4NL_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Independent dequantization of one block (ggml's `dequantize_row_*`), split into the scaled
/// part and the subtracted minimum: value = main - min. Used for reference dots and error bounds.
fn dequant_block(ty: GgmlType, b: &[u8], main: &mut Vec<f64>, min: &mut Vec<f64>) {
    let mut push = |v: f64, m: f64| {
        main.push(v);
        min.push(m);
    };
    match ty {
        GgmlType::F32 => push(f32::from_le_bytes(b[..4].try_into().unwrap()) as f64, 0.0),
        GgmlType::F16 => push(get_f16(b, 0) as f64, 0.0),
        GgmlType::BF16 => push(
            bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32() as f64,
            0.0,
        ),
        GgmlType::Q4_0 => {
            let d = get_f16(b, 0) as f64;
            let qs = &b[2..18];
            for j in 0..32 {
                let q = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 };
                push(d * (q as f64 - 8.0), 0.0);
            }
        }
        GgmlType::Q5_0 => {
            let d = get_f16(b, 0) as f64;
            let qh = u32::from_le_bytes(b[2..6].try_into().unwrap());
            let qs = &b[6..22];
            for j in 0..32 {
                let lo = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 } as u32;
                let q = lo | (((qh >> j) & 1) << 4);
                push(d * (q as f64 - 16.0), 0.0);
            }
        }
        GgmlType::Q4_1 | GgmlType::Q5_1 => {
            // The minimum is added: main - min with min = -m.
            let (d, m) = (get_f16(b, 0) as f64, get_f16(b, 2) as f64);
            let (qh, qs) = if ty == GgmlType::Q5_1 {
                (u32::from_le_bytes(b[4..8].try_into().unwrap()), &b[8..24])
            } else {
                (0, &b[4..20])
            };
            for j in 0..32 {
                let lo = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 } as u32;
                let q = lo | (((qh >> j) & 1) << 4);
                push(d * q as f64, -m);
            }
        }
        GgmlType::IQ4_NL => {
            let d = get_f16(b, 0) as f64;
            for j in 0..32 {
                let q = if j < 16 {
                    b[2 + j] & 15
                } else {
                    b[2 + j - 16] >> 4
                };
                push(d * IQ4NL_VALUES[q as usize] as f64, 0.0);
            }
        }
        GgmlType::MXFP4 => {
            // E2M1 (sign, 2-bit exponent, 1-bit mantissa) under the E8M0 scale 2^(e - 127).
            let d = 2f64.powi(b[0] as i32 - 127);
            let e2m1 = |c: u8| {
                let (e, m) = ((c >> 1) & 3, c & 1) as (u8, u8);
                let mag = if e == 0 {
                    0.5 * m as f64
                } else {
                    2f64.powi(e as i32 - 1) * (1.0 + 0.5 * m as f64)
                };
                if c & 8 != 0 {
                    -mag
                } else {
                    mag
                }
            };
            for j in 0..32 {
                let q = if j < 16 {
                    b[1 + j] & 15
                } else {
                    b[1 + j - 16] >> 4
                };
                push(d * e2m1(q), 0.0);
            }
        }
        GgmlType::IQ4_XS => {
            let d = get_f16(b, 0) as f64;
            let sh = u16::from_le_bytes([b[2], b[3]]) as u32;
            let (sl, qs) = (&b[4..8], &b[8..136]);
            for e in 0..QK_K {
                let (s, j) = (e / 32, e % 32);
                let lo = (sl[s / 2] >> (4 * (s % 2))) & 15;
                let ls = (lo as u32 | (((sh >> (2 * s)) & 3) << 4)) as i32 - 32;
                let byte = qs[16 * s + j % 16];
                let q = if j < 16 { byte & 15 } else { byte >> 4 };
                push(d * ls as f64 * IQ4NL_VALUES[q as usize] as f64, 0.0);
            }
        }
        GgmlType::Q8_0 => {
            let d = get_f16(b, 0) as f64;
            for &q in &b[2..34] {
                push(d * (q as i8) as f64, 0.0);
            }
        }
        GgmlType::Q2_K => {
            let (sc, qs) = (&b[0..16], &b[16..80]);
            let (d, dmin) = (get_f16(b, 80) as f64, get_f16(b, 82) as f64);
            for e in 0..QK_K {
                let (n, s, l) = (e / 128, (e % 128) / 32, e % 32);
                let is = 8 * n + 2 * s + l / 16;
                let q = (qs[32 * n + l] >> (2 * s)) & 3;
                push(
                    d * (sc[is] & 15) as f64 * q as f64,
                    dmin * (sc[is] >> 4) as f64,
                );
            }
        }
        GgmlType::Q3_K => {
            let (hm, qs, sb) = (&b[0..32], &b[32..96], &b[96..108]);
            let d = get_f16(b, 108) as f64;
            // ggml's 32-bit-word unpacking of the 6-bit scales.
            let w = |i: usize| u32::from_le_bytes(sb[4 * i..4 * i + 4].try_into().unwrap());
            let (a0, a1, t) = (w(0), w(1), w(2));
            let (k1, k2) = (0x03030303u32, 0x0f0f0f0fu32);
            let words = [
                (a0 & k2) | ((t & k1) << 4),
                (a1 & k2) | (((t >> 2) & k1) << 4),
                ((a0 >> 4) & k2) | (((t >> 4) & k1) << 4),
                ((a1 >> 4) & k2) | (((t >> 6) & k1) << 4),
            ];
            let scales: Vec<i32> = words
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .map(|x| x as i8 as i32 - 32)
                .collect();
            for e in 0..QK_K {
                let (n, s, l) = (e / 128, (e % 128) / 32, e % 32);
                let mut q = ((qs[32 * n + l] >> (2 * s)) & 3) as i32;
                if hm[l] & (1 << (4 * n + s)) == 0 {
                    q -= 4;
                }
                push(d * scales[e / 16] as f64 * q as f64, 0.0);
            }
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let (d, dmin) = (get_f16(b, 0) as f64, get_f16(b, 2) as f64);
            let s = &b[4..16];
            let (qh, qs) = if ty == GgmlType::Q5_K {
                (&b[16..48], &b[48..176])
            } else {
                (&b[0..0], &b[16..144])
            };
            for e in 0..QK_K {
                let (j, hi, l) = (e / 64, (e % 64) / 32, e % 32);
                let sb = 2 * j + hi;
                let (sc, m) = if sb < 4 {
                    (s[sb] & 63, s[sb + 4] & 63)
                } else {
                    (
                        (s[sb + 4] & 15) | ((s[sb - 4] >> 6) << 4),
                        (s[sb + 4] >> 4) | ((s[sb] >> 6) << 4),
                    )
                };
                let mut q = if hi == 0 {
                    qs[32 * j + l] & 15
                } else {
                    qs[32 * j + l] >> 4
                } as u32;
                if ty == GgmlType::Q5_K && qh[l] & (1 << sb) != 0 {
                    q += 16;
                }
                push(d * sc as f64 * q as f64, dmin * m as f64);
            }
        }
        GgmlType::Q6_K => {
            let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
            let d = get_f16(b, 208) as f64;
            for e in 0..QK_K {
                let (n, part, l) = (e / 128, (e % 128) / 32, e % 32);
                let lo = match part {
                    0 => ql[64 * n + l] & 15,
                    1 => ql[64 * n + l + 32] & 15,
                    2 => ql[64 * n + l] >> 4,
                    _ => ql[64 * n + l + 32] >> 4,
                };
                let h = (qh[32 * n + l] >> (2 * part)) & 3;
                let q = (lo | (h << 4)) as i32 - 32;
                push(d * (sc[e / 16] as i8) as f64 * q as f64, 0.0);
            }
        }
        _ => unreachable!("{ty}"),
    }
}

pub fn dequant_rows(ty: GgmlType, bytes: &[u8]) -> (Vec<f64>, Vec<f64>) {
    let ts = ty.type_size();
    let (mut main, mut min) = (Vec::new(), Vec::new());
    for blk in bytes.chunks(ts) {
        dequant_block(ty, blk, &mut main, &mut min);
    }
    (main, min)
}

/// Every weight type Kolibri multiplies (the registry's: a new type is tested without being
/// listed here, and fails until `dequant_block` has an independent reference for it).
pub fn types() -> Vec<GgmlType> {
    kolibri::kernels::types::REGISTRY
        .iter()
        .map(|k| k.ty())
        .collect()
}

pub fn q8_0_of(x: &[f32]) -> Vec<BlockQ8_0> {
    let mut v = vec![
        BlockQ8_0 {
            d: f16::ZERO,
            qs: [0; 32]
        };
        x.len() / 32
    ];
    quantize_row_q8_0(x, &mut v);
    v
}

pub fn q8_k_of(x: &[f32]) -> Vec<BlockQ8K> {
    let mut v = vec![
        BlockQ8K {
            d: 0.0,
            qs: [0; QK_K],
            bsums: [0; 16]
        };
        x.len() / QK_K
    ];
    quantize_row_q8_k(x, &mut v);
    v
}

/// Whether two slices hold the same bit patterns (exact, NaN-safe equality).
pub fn same_bits<T: Copy, B: PartialEq>(a: &[T], b: &[T], bits: fn(T) -> B) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(*x) == bits(*y))
}

/// Row `r` of `w` · token `t` of `x` by the scalar in-place kernel: the reference dot.
pub fn scalar_dot(ty: GgmlType, row: &[u8], k: usize, x: &[f32]) -> f32 {
    let wm = WeightMatrix {
        ty,
        rows: 1,
        k,
        data: row,
    };
    let act = QuantizedActivations::quantize(x, 1, k, ty).unwrap();
    let mut out = [0f32];
    kernels::matmul_with(CpuPath::Scalar, &wm, &act, &mut out).unwrap();
    out[0]
}

/// The scalar backend.
pub fn scalar() -> &'static Backend {
    Backend::for_path(CpuPath::Scalar).unwrap()
}
