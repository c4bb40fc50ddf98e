//! Kernel tests: every SIMD path against the scalar twin (through the public matmul, so the
//! dispatch tables and tiling are covered too), the scalar kernels against an independent
//! dequantize-then-dot reference, path selection and error reporting.

use half::{bf16, f16};
use kolibri::kernels::{self, scalar, CpuPath, KernelError, QuantizedActivations, WeightMatrix};
use kolibri::quant::activation::{quantize_row_q8_0, quantize_row_q8_k};
use kolibri::quant::{cast_blocks, Block, BlockQ8K, BlockQ8_0, GgmlType, QK_K};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn f(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    fn floats(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f() * scale).collect()
    }
}

/// A buffer whose slice `[off..off+len]` is aligned to 4 bytes, so block casts succeed.
struct Aligned {
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
    fn bytes(&self) -> &[u8] {
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
fn random_weights(ty: GgmlType, rows: usize, k: usize, rng: &mut Rng) -> Aligned {
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
        *x = rng.next() as u8;
    }
    // (offset of d, offset of dmin) in the block.
    let (d_at, dmin_at) = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => (0, None),
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

fn dequant_rows(ty: GgmlType, bytes: &[u8]) -> (Vec<f64>, Vec<f64>) {
    let ts = ty.type_size();
    let (mut main, mut min) = (Vec::new(), Vec::new());
    for blk in bytes.chunks(ts) {
        dequant_block(ty, blk, &mut main, &mut min);
    }
    (main, min)
}

const TYPES: [GgmlType; 11] = [
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::F32,
];

#[test]
fn every_path_matches_scalar_on_all_types_and_shapes() {
    let paths = CpuPath::available();
    eprintln!("testing paths {paths:?}");
    let mut rng = Rng(42);
    for ty in TYPES {
        let bs = ty.block_size().max(32);
        // One block, a few blocks, many blocks (odd counts exercise the 2-block loops' tails).
        let ks: Vec<usize> = if bs == QK_K {
            vec![QK_K, 3 * QK_K, 11 * QK_K]
        } else {
            // 37 and 52 (float types only) reach the 4-wide and scalar tails.
            vec![32, 96, 1056, 48, 37, 52]
        };
        for &k in &ks {
            if k % ty.block_size() != 0 {
                continue;
            }
            for &(rows, n_tokens) in &[(1, 1), (7, 2), (33, 3), (19, 5), (67, 17), (5, 1)] {
                let w = random_weights(ty, rows, k, &mut rng);
                let x = rng.floats(n_tokens * k, 2.0);
                let wm = WeightMatrix {
                    ty,
                    rows,
                    k,
                    data: w.bytes(),
                };
                let act = QuantizedActivations::quantize(&x, n_tokens, k, ty).unwrap();
                let mut want = vec![0.0f32; rows * n_tokens];
                kernels::matmul_with(CpuPath::Scalar, &wm, &act, &mut want).unwrap();
                let (main, min) = dequant_rows(ty, w.bytes());
                for &p in &paths {
                    let mut got = vec![f32::NAN; rows * n_tokens];
                    kernels::matmul_with(p, &wm, &act, &mut got).unwrap();
                    for t in 0..n_tokens {
                        for r in 0..rows {
                            // Error bound from the absolute sizes of all the terms (the sum
                            // itself may cancel). |x| slightly over-bounds |dequant(a)|.
                            let xs = &x[t * k..(t + 1) * k];
                            let mag: f64 = (0..k)
                                .map(|i| {
                                    (main[r * k + i].abs() + min[r * k + i].abs())
                                        * xs[i].abs() as f64
                                })
                                .sum();
                            let tol = 2e-5 * mag * 1.02 + 1e-6;
                            let (g, e) = (got[t * rows + r], want[t * rows + r]);
                            // The NEON integer kernels keep the scalar kernels' order of f32 work
                            // (the float ones sum in f32 lanes, the scalar ones in f64).
                            let float =
                                matches!(ty, GgmlType::F16 | GgmlType::BF16 | GgmlType::F32);
                            if !float
                                && matches!(p, CpuPath::Neon | CpuPath::Dotprod | CpuPath::I8mm)
                            {
                                assert_eq!(g.to_bits(), e.to_bits(), "{ty} {p} t={t} r={r}");
                            }
                            assert!(
                                ((g - e) as f64).abs() <= tol,
                                "{ty} {p} k={k} rows={rows} n={n_tokens} t={t} r={r}: \
                                 {g} vs scalar {e} (tol {tol})"
                            );
                        }
                    }
                }
            }
        }
    }
}

fn q8_0_of(x: &[f32]) -> Vec<BlockQ8_0> {
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

fn q8_k_of(x: &[f32]) -> Vec<BlockQ8K> {
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

#[test]
fn scalar_kernels_match_dequantized_reference() {
    let mut rng = Rng(7);
    let k = 4 * QK_K;
    for ty in TYPES {
        for _ in 0..4 {
            let w = random_weights(ty, 1, k, &mut rng);
            let x = rng.floats(k, 1.5);
            let (main, min) = dequant_rows(ty, w.bytes());
            let b = w.bytes();
            // Dequantized activations exactly as the kernel sees them.
            let (got, a): (f32, Vec<f64>) = match ty {
                GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => {
                    let q = q8_0_of(&x);
                    let a = q
                        .iter()
                        .flat_map(|b| b.qs.map(|v| b.d.to_f32() as f64 * v as f64))
                        .collect();
                    let got = match ty {
                        GgmlType::Q4_0 => scalar::vec_dot_q4_0_q8_0(cast_blocks(b).unwrap(), &q),
                        GgmlType::Q5_0 => scalar::vec_dot_q5_0_q8_0(cast_blocks(b).unwrap(), &q),
                        _ => scalar::vec_dot_q8_0_q8_0(cast_blocks(b).unwrap(), &q),
                    };
                    (got, a)
                }
                GgmlType::F16 => {
                    let a16: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
                    let a = a16.iter().map(|v| v.to_f32() as f64).collect();
                    (scalar::vec_dot_f16_f16(cast_blocks(b).unwrap(), &a16), a)
                }
                GgmlType::BF16 => {
                    let a16: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
                    let a = a16.iter().map(|v| v.to_f32() as f64).collect();
                    (scalar::vec_dot_bf16_bf16(cast_blocks(b).unwrap(), &a16), a)
                }
                GgmlType::F32 => {
                    let a = x.iter().map(|&v| v as f64).collect();
                    (scalar::vec_dot_f32_f32(cast_blocks(b).unwrap(), &x), a)
                }
                _ => {
                    let q = q8_k_of(&x);
                    let a = q
                        .iter()
                        .flat_map(|b| b.qs.map(|v| b.d as f64 * v as f64))
                        .collect();
                    let got = match ty {
                        GgmlType::Q2_K => scalar::vec_dot_q2_k_q8_k(cast_blocks(b).unwrap(), &q),
                        GgmlType::Q3_K => scalar::vec_dot_q3_k_q8_k(cast_blocks(b).unwrap(), &q),
                        GgmlType::Q4_K => scalar::vec_dot_q4_k_q8_k(cast_blocks(b).unwrap(), &q),
                        GgmlType::Q5_K => scalar::vec_dot_q5_k_q8_k(cast_blocks(b).unwrap(), &q),
                        _ => scalar::vec_dot_q6_k_q8_k(cast_blocks(b).unwrap(), &q),
                    };
                    (got, a)
                }
            };
            let want: f64 = (0..k).map(|i| (main[i] - min[i]) * a[i]).sum();
            let mag: f64 = (0..k)
                .map(|i| (main[i].abs() + min[i].abs()) * a[i].abs())
                .sum();
            let tol = 1e-5 * mag + 1e-6;
            assert!(
                (got as f64 - want).abs() <= tol,
                "{ty}: scalar {got} vs reference {want} (tol {tol})"
            );
        }
    }
}

#[test]
fn path_selection_and_forcing() {
    let best = CpuPath::best_available();
    assert!(CpuPath::Scalar.is_available());
    assert_eq!(kernels::resolve_cpu_path(None), (best, None));
    assert_eq!(kernels::resolve_cpu_path(Some("")), (best, None));
    assert_eq!(
        kernels::resolve_cpu_path(Some("scalar")),
        (CpuPath::Scalar, None)
    );
    assert_eq!(kernels::resolve_cpu_path(Some("SCALAR")).0, CpuPath::Scalar);
    let (p, warn) = kernels::resolve_cpu_path(Some("nonsense"));
    assert_eq!(p, best);
    assert!(warn.is_some());
    for req in [
        CpuPath::Avx2,
        CpuPath::Avx512,
        CpuPath::Neon,
        CpuPath::Dotprod,
        CpuPath::I8mm,
    ] {
        let (p, warn) = kernels::resolve_cpu_path(Some(req.name()));
        if req.is_available() {
            assert_eq!((p, warn), (req, None));
        } else {
            // Asking for more than the CPU has: best available, with a warning.
            assert_eq!(p, best);
            assert!(warn.is_some());
        }
    }
    assert!(kernels::cpu_path().is_available());
}

#[test]
fn errors_instead_of_panics() {
    assert!(!kernels::supports(GgmlType::Q4_1));
    assert!(!kernels::supports(GgmlType::IQ2_XXS));
    for ty in TYPES {
        assert!(kernels::supports(ty), "{ty}");
    }
    let x = vec![0.5f32; 64];
    assert_eq!(
        QuantizedActivations::quantize(&x, 1, 64, GgmlType::Q4_1).err(),
        Some(KernelError::UnsupportedType(GgmlType::Q4_1))
    );
    // Row length not a multiple of the activation block.
    assert!(matches!(
        QuantizedActivations::quantize(&x, 1, 64, GgmlType::Q4_K),
        Err(KernelError::Shape(_))
    ));
    assert!(matches!(
        QuantizedActivations::quantize(&x, 2, 64, GgmlType::Q8_0),
        Err(KernelError::Shape(_))
    ));

    let mut rng = Rng(1);
    let w = random_weights(GgmlType::Q4_0, 3, 64, &mut rng);
    let wm = WeightMatrix {
        ty: GgmlType::Q4_0,
        rows: 3,
        k: 64,
        data: w.bytes(),
    };
    let act = QuantizedActivations::quantize(&x, 1, 64, GgmlType::Q8_0).unwrap();
    let mut out = vec![0.0; 3];
    kernels::matmul(&wm, &act, &mut out).unwrap();
    let mut short = vec![0.0; 2];
    assert!(matches!(
        kernels::matmul(&wm, &act, &mut short),
        Err(KernelError::Shape(_))
    ));
    let bad = WeightMatrix {
        data: &w.bytes()[..50],
        ..wm
    };
    assert!(matches!(
        kernels::matmul(&bad, &act, &mut out),
        Err(KernelError::Shape(_))
    ));
    let f32_act = QuantizedActivations::quantize(&x, 1, 64, GgmlType::F32).unwrap();
    assert!(matches!(
        kernels::matmul(&wm, &f32_act, &mut out),
        Err(KernelError::ActivationFormat { .. })
    ));
    let q41 = WeightMatrix {
        ty: GgmlType::Q4_1,
        ..wm
    };
    assert_eq!(
        kernels::matmul(&q41, &act, &mut out),
        Err(KernelError::UnsupportedType(GgmlType::Q4_1))
    );
}

#[test]
fn activations_shared_across_weight_types() {
    // Q4_K and Q6_K (e.g. attn_q and attn_v of a Q4_K_M model) share one Q8_K quantization.
    let mut rng = Rng(3);
    let k = 2 * QK_K;
    let x = rng.floats(2 * k, 1.0);
    let act = QuantizedActivations::quantize(&x, 2, k, GgmlType::Q4_K).unwrap();
    assert_eq!(act.format(), kernels::ActFormat::Q8K);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K] {
        let w = random_weights(ty, 4, k, &mut rng);
        let wm = WeightMatrix {
            ty,
            rows: 4,
            k,
            data: w.bytes(),
        };
        let mut out = vec![0.0; 8];
        kernels::matmul(&wm, &act, &mut out).unwrap();
        assert!(out.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn self_test_passes_on_every_available_path() {
    for p in CpuPath::available() {
        assert_eq!(kernels::self_test(p), Ok(()), "{p}");
    }
}

/// One weight type for the tile tests: its scalar dot, activation quantizer and activation
/// dequantizer.
struct TileCase<W: 'static, A: 'static> {
    ty: GgmlType,
    dot: fn(&[W], &[A]) -> f32,
    quant: fn(&[f32]) -> Vec<A>,
    dequant: fn(&A) -> Vec<f64>,
    ks: &'static [usize],
}

fn dequant_q8_0(b: &BlockQ8_0) -> Vec<f64> {
    b.qs.iter().map(|&q| b.d.to_f64() * q as f64).collect()
}

fn dequant_q8_k(b: &BlockQ8K) -> Vec<f64> {
    b.qs.iter().map(|&q| b.d as f64 * q as f64).collect()
}

/// Every path's matmul (tiled kernels for n_tokens >= 2, dot kernels for tails) against the
/// scalar vec_dot of every (row, token) pair. The tolerance is scaled by the sum of the
/// absolute element terms of all blocks, |scaled part| + |minimum part| per weight times
/// |activation|: the kernels convert partial integer sums (SIMD lanes) to f32, so rounding
/// follows their magnitudes, which can far exceed the block's total.
fn check_tiles<W: Block, A: Copy>(case: TileCase<W, A>, rng: &mut Rng) {
    let TileCase {
        ty,
        dot,
        quant,
        dequant,
        ks,
    } = case;
    let mut shapes = Vec::new();
    for &rows in &[1, 2, 3, 5, 8, 17] {
        for &n in &[1, 2, 3, 4, 5, 7, 16, 33] {
            for &k in ks {
                shapes.push((rows, n, k));
            }
        }
    }
    // Several row blocks and parallel tasks, with row and token tails.
    shapes.push((301, 6, ks[ks.len() - 1]));
    for (rows, n_tokens, k) in shapes {
        let w = random_weights(ty, rows, k, rng);
        let x = rng.floats(n_tokens * k, 2.0);
        let wm = WeightMatrix {
            ty,
            rows,
            k,
            data: w.bytes(),
        };
        let act = QuantizedActivations::quantize(&x, n_tokens, k, ty).unwrap();
        let wb: &[W] = cast_blocks(w.bytes()).unwrap();
        let ab: Vec<A> = x.chunks(k).flat_map(quant).collect();
        let aq: Vec<f64> = ab.iter().flat_map(dequant).collect();
        let (main, min) = dequant_rows(ty, w.bytes());
        let nb = wb.len() / rows;
        for p in CpuPath::available() {
            let mut got = vec![f32::NAN; rows * n_tokens];
            kernels::matmul_with(p, &wm, &act, &mut got).unwrap();
            for t in 0..n_tokens {
                for r in 0..rows {
                    let want = dot(&wb[r * nb..(r + 1) * nb], &ab[t * nb..(t + 1) * nb]);
                    let mag: f64 = (0..k)
                        .map(|e| {
                            (main[r * k + e].abs() + min[r * k + e].abs()) * aq[t * k + e].abs()
                        })
                        .sum();
                    let tol = 1e-5 * mag;
                    let g = got[t * rows + r];
                    // The NEON kernels of quantized types (the i8mm tiles too) keep the scalar
                    // order of f32 work; the float ones sum in f32 lanes, the scalar in f64.
                    let float = matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
                    if matches!(p, CpuPath::Neon | CpuPath::Dotprod | CpuPath::I8mm) && !float {
                        assert_eq!(g.to_bits(), want.to_bits(), "{ty} {p} r={r} t={t}");
                    }
                    assert!(
                        ((g - want) as f64).abs() <= tol,
                        "{ty} {p} rows={rows} n={n_tokens} k={k} r={r} t={t}: {g} vs scalar \
                         {want} (tol {tol})"
                    );
                }
            }
        }
    }
}
#[test]
fn tiled_matmul_matches_scalar_dot_per_pair() {
    let mut rng = Rng(11);
    let small: &[usize] = &[32, 64, 7 * 32, 40 * 32];
    let big: &[usize] = &[QK_K, 2 * QK_K, 5 * QK_K];
    check_tiles(
        TileCase {
            ty: GgmlType::Q4_K,
            dot: scalar::vec_dot_q4_k_q8_k,
            quant: q8_k_of,
            dequant: dequant_q8_k,
            ks: big,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::Q6_K,
            dot: scalar::vec_dot_q6_k_q8_k,
            quant: q8_k_of,
            dequant: dequant_q8_k,
            ks: big,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::Q5_0,
            dot: scalar::vec_dot_q5_0_q8_0,
            quant: q8_0_of,
            dequant: dequant_q8_0,
            ks: small,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::Q8_0,
            dot: scalar::vec_dot_q8_0_q8_0,
            quant: q8_0_of,
            dequant: dequant_q8_0,
            ks: small,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::Q4_0,
            dot: scalar::vec_dot_q4_0_q8_0,
            quant: q8_0_of,
            dequant: dequant_q8_0,
            ks: small,
        },
        &mut rng,
    );
    // Float rows: lengths that end in partial SIMD slices, and one shorter than a slice.
    let float_ks: &[usize] = &[1, 7, 16, 33, 100, 1000];
    check_tiles(
        TileCase {
            ty: GgmlType::F32,
            dot: scalar::vec_dot_f32_f32,
            quant: |x| x.to_vec(),
            dequant: |a| vec![*a as f64],
            ks: float_ks,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::F16,
            dot: scalar::vec_dot_f16_f16,
            quant: |x| x.iter().map(|&v| f16::from_f32(v)).collect(),
            dequant: |a| vec![a.to_f64()],
            ks: float_ks,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::BF16,
            dot: scalar::vec_dot_bf16_bf16,
            quant: |x| x.iter().map(|&v| bf16::from_f32(v)).collect(),
            dequant: |a| vec![a.to_f64()],
            ks: float_ks,
        },
        &mut rng,
    );
}

/// Whether two slices hold the same bit patterns (exact, NaN-safe equality).
fn same_bits<T: Copy, B: PartialEq>(a: &[T], b: &[T], bits: fn(T) -> B) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(*x) == bits(*y))
}

/// The key dot of the per-query attention kernel: the scalar twin is the documented sum order
/// (eight partial sums, unfused products, then the tail), and every path reproduces it.
#[test]
fn f16_key_dot_matches_scalar_bit_for_bit() {
    let mut rng = Rng(11);
    for len in (0..=40).chain([64, 128, 256, 263]) {
        let q = rng.floats(len, 3.0);
        let k: Vec<f16> = rng
            .floats(len, 3.0)
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let want = scalar::f16_dot(&q, &k);
        let body = len / 8 * 8;
        let mut lanes = [0f32; 8];
        for i in 0..body {
            lanes[i % 8] += q[i] * k[i].to_f32();
        }
        let tail: f32 = (body..len).map(|i| q[i] * k[i].to_f32()).sum();
        assert_eq!(want.to_bits(), (lanes.iter().sum::<f32>() + tail).to_bits());
        for path in CpuPath::available() {
            let got = kernels::f16_dot_with(path, &q, &k);
            assert_eq!(got.to_bits(), want.to_bits(), "{path} f16_dot at len {len}");
        }
    }
}

/// One head's online-softmax pass over strided f16 cache rows: every path gives the scalar
/// twin's bits, and the result is a softmax-weighted mean of the values (checked in f64 with
/// the f16 accumulator's tolerance).
#[test]
fn f16_attend_matches_scalar_and_softmax() {
    let mut rng = Rng(12);
    for (hd, n_kv, kvh, rows) in [(64, 2, 1, 0..37), (256, 1, 0, 5..9), (80, 3, 2, 0..1)] {
        let n_rows = rows.end + 2;
        let cache = |rng: &mut Rng| -> Vec<f16> {
            rng.floats(n_rows * n_kv * hd, 2.0)
                .into_iter()
                .map(f16::from_f32)
                .collect()
        };
        let (keys, values) = (cache(&mut rng), cache(&mut rng));
        let q16: Vec<f32> = rng
            .floats(hd, 1.0)
            .into_iter()
            .map(|x| f16::from_f32(x).to_f32())
            .collect();
        let (k0, v0, stride) = (
            &keys[kvh * hd..],
            &values[kvh * hd..],
            (n_kv * hd, n_kv * hd),
        );
        let scale = 1.0 / (hd as f32).sqrt();
        let mut want = vec![0f32; hd];
        kernels::f16_attend_with(
            CpuPath::Scalar,
            &q16,
            k0,
            v0,
            stride,
            rows.clone(),
            scale,
            &mut want,
        );
        let scores: Vec<f64> = rows
            .clone()
            .map(|p| {
                let k = &k0[p * stride.0..][..hd];
                q16.iter()
                    .zip(k)
                    .map(|(a, b)| *a as f64 * b.to_f64())
                    .sum::<f64>()
                    * scale as f64
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = scores.iter().map(|s| (s - max).exp()).sum();
        for d in 0..hd {
            let exact: f64 = rows
                .clone()
                .zip(&scores)
                .map(|(p, s)| (s - max).exp() / total * v0[p * stride.1 + d].to_f64())
                .sum();
            assert!(
                (want[d] as f64 - exact).abs() < 0.02,
                "dim {d}: {} vs {exact}",
                want[d]
            );
        }
        for path in CpuPath::available() {
            let mut got = vec![f32::NAN; hd];
            kernels::f16_attend_with(path, &q16, k0, v0, stride, rows.clone(), scale, &mut got);
            assert!(
                same_bits(&got, &want, f32::to_bits),
                "{path} f16_attend differs from scalar at head dim {hd}"
            );
        }
    }
}

#[test]
fn f16_accumulator_kernels_match_scalar_bit_for_bit() {
    let mut rng = Rng(7);
    for len in (0..=40).chain([256, 263]) {
        let v: Vec<f16> = rng
            .floats(len, 8.0)
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let start: Vec<f16> = rng
            .floats(len, 30.0)
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let (w, s) = (rng.f() * 2.0, rng.f() * 1.5);
        let mut want = start.clone();
        scalar::f16_mad(&mut want, &v, w);
        scalar::f16_scale(&mut want, s);
        // The scalar twin is ggml's formula: one rounding of the fused v * w + acc.
        for i in 0..len {
            let fused = f16::from_f32(v[i].to_f32().mul_add(w, start[i].to_f32()));
            assert_eq!(want[i], f16::from_f32(fused.to_f32() * s));
        }
        for path in CpuPath::available() {
            let mut got = start.clone();
            kernels::f16_mad_with(path, &mut got, &v, w);
            kernels::f16_scale_with(path, &mut got, s);
            assert!(
                same_bits(&got, &want, f16::to_bits),
                "{path} f16 accumulator kernels differ from scalar at len {len}"
            );
            // Widening, with infinities, NaN and subnormals among the values.
            let mut h = v.clone();
            for (i, x) in [
                f16::INFINITY,
                f16::NEG_INFINITY,
                f16::NAN,
                f16::from_bits(3),
            ]
            .into_iter()
            .enumerate()
            {
                if let Some(slot) = h.get_mut(5 * i) {
                    *slot = x;
                }
            }
            let mut wide = vec![0f32; len];
            kernels::f16_row_to_f32_with(path, &h, &mut wide);
            for (x, y) in h.iter().zip(&wide) {
                assert!(x.to_f32().to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()));
            }
        }
    }
}

/// The in-place scalar dot of one row of a type that is repacked (Q5_0, Q8_0, Q4_K, Q6_K)
/// with one token's Q8_0 (`a`) or Q8_K (`ak`) blocks.
fn repacked_type_dot(ty: GgmlType, wr: &[u8], a: &[BlockQ8_0], ak: &[BlockQ8K]) -> f32 {
    use kolibri::quant::{BlockQ4K, BlockQ5_0, BlockQ6K};
    match ty {
        GgmlType::Q5_0 => scalar::vec_dot_q5_0_q8_0(cast_blocks::<BlockQ5_0>(wr).unwrap(), a),
        GgmlType::Q4_K => scalar::vec_dot_q4_k_q8_k(cast_blocks::<BlockQ4K>(wr).unwrap(), ak),
        GgmlType::Q6_K => scalar::vec_dot_q6_k_q8_k(cast_blocks::<BlockQ6K>(wr).unwrap(), ak),
        _ => scalar::vec_dot_q8_0_q8_0(cast_blocks::<BlockQ8_0>(wr).unwrap(), a),
    }
}

/// The 8-row interleaved layouts (Q5_0, Q8_0, Q4_K, Q6_K): the scalar twin and every SIMD
/// path through `matmul_packed_with` against the in-place scalar dot per (row, token), on
/// shapes with a partial last group and token counts that use every kernel width; row lookups
/// against the in-place dequantization.
#[test]
fn interleaved_layouts_match_in_place_dot() {
    use kolibri::kernels::interleaved::PackedMatrix;
    use kolibri::quant::dequantize_row;
    let mut rng = Rng(42);
    for ty in [
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        let shapes: &[(usize, usize, usize)] = match ty {
            GgmlType::Q4_K | GgmlType::Q6_K => &[
                (8, 256, 1),
                (13, 512, 5),
                (37, 256, 9),
                (64, 1536, 4),
                (3, 768, 2),
                (9, 256, 3),
                (16, 256, 6),
                (11, 512, 7),
                (8, 256, 8),
                (5, 256, 19),
                (200, 512, 8),
                (97, 256, 13),
            ],
            _ => &[
                (8, 32, 1),
                (13, 64, 5),
                (37, 256, 9),
                (64, 896, 4),
                (3, 96, 2),
                (9, 64, 3),
                (16, 32, 6),
                (11, 128, 7),
                (8, 64, 8),
                (5, 64, 19),
                (200, 512, 8),
                (97, 256, 13),
            ],
        };
        for &(rows, k, n) in shapes {
            let w = random_weights(ty, rows, k, &mut rng);
            let packed = PackedMatrix::repack(ty, w.bytes(), rows, k, &|_| {}).unwrap();
            let x = rng.floats(n * k, 1.0);
            let act = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
            let is_k = k.is_multiple_of(QK_K) && matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K);
            let (q8, q8k) = match is_k {
                true => (Vec::new(), q8_k_of(&x)),
                false => (q8_0_of(&x), Vec::new()),
            };
            let rb = w.bytes().len() / rows;
            let dot = |r: usize, t: usize| {
                let wr = &w.bytes()[r * rb..(r + 1) * rb];
                let a = q8.get(t * k / 32..(t + 1) * k / 32).unwrap_or(&[]);
                let ak = q8k.get(t * k / QK_K..(t + 1) * k / QK_K).unwrap_or(&[]);
                repacked_type_dot(ty, wr, a, ak)
            };
            let mut by_path = Vec::new();
            for path in CpuPath::available() {
                let mut got = vec![f32::NAN; n * rows];
                kernels::matmul_packed_with(path, &packed, &act, &mut got).unwrap();
                by_path.push((path, got.clone()));
                for t in 0..n {
                    for r in 0..rows {
                        let (g, want) = (got[t * rows + r], dot(r, t));
                        assert!(
                            (g - want).abs() <= 1e-4 * want.abs().max(1.0),
                            "{ty} {path} rows {rows} k {k} token {t} row {r}: {g} vs {want}"
                        );
                    }
                }
            }
            // The AVX-512 two-group kernels sum the same integers and round the same way.
            let of = |p: CpuPath| by_path.iter().find(|(q, _)| *q == p).map(|(_, o)| o);
            if let (Some(wide), Some(narrow)) = (of(CpuPath::Avx512), of(CpuPath::Avx2)) {
                assert!(
                    same_bits(wide, narrow, f32::to_bits),
                    "{ty} rows {rows} k {k} n {n}: avx512 differs from avx2"
                );
            }
            for r in [0, rows / 2, rows - 1] {
                let (mut got, mut want) = (vec![0f32; k], vec![0f32; k]);
                packed.dequantize_row(r, &mut got);
                dequantize_row(ty, &w.bytes()[r * rb..(r + 1) * rb], &mut want).unwrap();
                assert_eq!(got, want, "{ty} row {r}");
            }
            // Wrong activation format and shape are errors, not panics.
            let act_f = QuantizedActivations::quantize(&x, n, k, GgmlType::F32).unwrap();
            let mut out = vec![0f32; n * rows];
            assert!(kernels::matmul_packed(&packed, &act_f, &mut out).is_err());
            assert!(kernels::matmul_packed(&packed, &act, &mut out[1..]).is_err());
        }
        // A type without a layout, or bytes that do not fit, are not repacked.
        assert!(PackedMatrix::repack(GgmlType::Q5_K, &[0; 176], 1, 256, &|_| {}).is_none());
        assert!(PackedMatrix::repack(ty, &[0; 34], 2, 32, &|_| {}).is_none());
    }
}

/// The tiled attention's f32 row kernels: several queries per call (more than 8 too, odd
/// lengths with tails, strided outputs), SIMD against the scalar versions.
#[cfg(target_arch = "x86_64")]
#[test]
fn attention_row_kernels_match_scalar() {
    if !kolibri::kernels::avx2::detected() {
        return;
    }
    use kolibri::kernels::avx2;
    let mut rng = Rng(7);
    for &(n_q, d, n, stride) in &[
        (1, 8, 1, 1),
        (4, 256, 64, 70),
        (7, 64, 13, 13),
        (10, 67, 9, 12),
        (5, 88, 6, 7),
        (6, 128, 21, 23),
        (3, 15, 4, 4),
    ] {
        let q = rng.floats(n_q * d, 1.0);
        let rows = rng.floats(n * d, 1.0);
        let (mut want, mut got) = (vec![0f32; n_q * stride], vec![0f32; n_q * stride]);
        scalar::f32_dots(&q, d, &rows, &mut want, stride);
        // SAFETY: AVX2 was detected.
        unsafe { avx2::f32_dots(&q, d, &rows, &mut got, stride) };
        let close = |got: &[f32], path: &str| {
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * d as f32,
                    "{path} dots {n_q}x{d}x{n}: {g} vs {w}"
                );
            }
        };
        close(&got, "avx2");
        if kolibri::kernels::avx512::detected() {
            // Entries between the rows of a strided output stay untouched.
            got.fill(0.0);
            // SAFETY: AVX-512 was detected.
            unsafe { kolibri::kernels::avx512::f32_dots(&q, d, &rows, &mut got, stride) };
            close(&got, "avx512");
        }
        let w = rng.floats(n_q * stride, 1.0);
        let acc0 = rng.floats(n_q * d, 1.0);
        let (mut want, mut got) = (acc0.clone(), acc0.clone());
        scalar::f32_weighted_sum(&mut want, d, &rows, &w, stride);
        // SAFETY: AVX2 was detected.
        unsafe { avx2::f32_weighted_sum(&mut got, d, &rows, &w, stride) };
        assert_eq!(got, want, "weighted sum {n_q}x{d}x{n}");
        if kolibri::kernels::avx512::detected() {
            got.copy_from_slice(&acc0);
            // SAFETY: AVX-512 was detected.
            unsafe { kolibri::kernels::avx512::f32_weighted_sum(&mut got, d, &rows, &w, stride) };
            assert_eq!(got, want, "avx512 weighted sum {n_q}x{d}x{n}");
        }
    }
}

/// The AMX tile kernels (batches of 16 tokens and more) against the AVX-512 vector kernels,
/// bit for bit, and against the in-place scalar dot: whole and partial token tiles, odd group
/// counts, a partial last group and weight panels split over several passes.
#[cfg(target_arch = "x86_64")]
#[test]
fn amx_tiles_match_vector_kernels_bit_for_bit() {
    use kolibri::kernels::interleaved::PackedMatrix;
    if !kernels::amx_available() {
        eprintln!("no AMX-INT8 here: nothing to compare");
        return;
    }
    let mut rng = Rng(7);
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ] {
        let is_k = matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K);
        let shapes: &[(usize, usize, usize)] = match is_k {
            true => &[
                (16, 256, 16),
                (32, 512, 32),
                (40, 768, 48),
                (24, 256, 50),
                (17, 256, 64),
                (200, 1536, 37),
                (64, 8960, 20),
                (8, 256, 40),
            ],
            false => &[
                (16, 32, 16),
                (32, 96, 32),
                (40, 896, 48),
                (24, 64, 50),
                (17, 32, 64),
                (200, 896, 37),
                (64, 30720, 20),
                (8, 64, 40),
            ],
        };
        for &(rows, k, n) in shapes {
            let w = random_weights(ty, rows, k, &mut rng);
            let packed = PackedMatrix::repack(ty, w.bytes(), rows, k, &|_| {}).unwrap();
            let x = rng.floats(n * k, 1.0);
            let act = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
            let run = |amx: bool| {
                let mut got = vec![f32::NAN; n * rows];
                kernels::matmul_packed_tiles(CpuPath::Avx512, amx, &packed, &act, &mut got)
                    .unwrap();
                got
            };
            let (tiles, vector) = (run(true), run(false));
            assert!(
                same_bits(&tiles, &vector, f32::to_bits),
                "{ty} rows {rows} k {k} n {n}: AMX differs from AVX-512"
            );
            let (q8, q8k) = match is_k {
                true => (Vec::new(), q8_k_of(&x)),
                false => (q8_0_of(&x), Vec::new()),
            };
            let rb = w.bytes().len() / rows;
            for t in [0, n / 2, n - 1] {
                for r in 0..rows {
                    let wr = &w.bytes()[r * rb..(r + 1) * rb];
                    let a = q8.get(t * k / 32..(t + 1) * k / 32).unwrap_or(&[]);
                    let ak = q8k.get(t * k / QK_K..(t + 1) * k / QK_K).unwrap_or(&[]);
                    let want = repacked_type_dot(ty, wr, a, ak);
                    let g = tiles[t * rows + r];
                    assert!(
                        (g - want).abs() <= 1e-4 * want.abs().max(1.0),
                        "{ty} rows {rows} k {k} token {t} row {r}: {g} vs {want}"
                    );
                }
            }
        }
    }
}
