//! Matmuls on every path against the scalar ones and the scalar ones against a reference.

use half::{bf16, f16};
use kolibri::kernels::{self, CpuPath, QuantizedActivations, WeightMatrix};
use kolibri::quant::{BlockQ8K, BlockQ8_0, GgmlType, QK_K};

use super::*;

#[test]
fn every_path_matches_scalar_on_all_types_and_shapes() {
    let paths = CpuPath::available();
    eprintln!("testing paths {paths:?}");
    let mut rng = Rng(42);
    for ty in types() {
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

#[test]
fn scalar_kernels_match_dequantized_reference() {
    let mut rng = Rng(7);
    let k = 4 * QK_K;
    for ty in types() {
        for _ in 0..4 {
            let w = random_weights(ty, 1, k, &mut rng);
            let x = rng.floats(k, 1.5);
            let (main, min) = dequant_rows(ty, w.bytes());
            let got = scalar_dot(ty, w.bytes(), k, &x);
            // Dequantized activations exactly as the kernel sees them.
            let a: Vec<f64> = match ty {
                GgmlType::Q4_0
                | GgmlType::Q4_1
                | GgmlType::Q5_0
                | GgmlType::Q5_1
                | GgmlType::Q8_0
                | GgmlType::IQ4_NL
                | GgmlType::MXFP4 => q8_0_of(&x)
                    .iter()
                    .flat_map(|b| b.qs.map(|v| b.d.to_f32() as f64 * v as f64))
                    .collect(),
                GgmlType::F16 => x.iter().map(|&v| f16::from_f32(v).to_f64()).collect(),
                GgmlType::BF16 => x.iter().map(|&v| bf16::from_f32(v).to_f64()).collect(),
                GgmlType::F32 => x.iter().map(|&v| v as f64).collect(),
                _ => q8_k_of(&x)
                    .iter()
                    .flat_map(|b| b.qs.map(|v| b.d as f64 * v as f64))
                    .collect(),
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

/// One weight type for the tile tests: its activation quantizer and dequantizer.
struct TileCase<A: 'static> {
    ty: GgmlType,
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
/// scalar dot of every (row, token) pair (the scalar path's matmul). The tolerance is scaled by the sum of the
/// absolute element terms of all blocks, |scaled part| + |minimum part| per weight times
/// |activation|: the kernels convert partial integer sums (SIMD lanes) to f32, so rounding
/// follows their magnitudes, which can far exceed the block's total.
fn check_tiles<A: Copy>(case: TileCase<A>, rng: &mut Rng) {
    let TileCase {
        ty,
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
        let ab: Vec<A> = x.chunks(k).flat_map(quant).collect();
        let aq: Vec<f64> = ab.iter().flat_map(dequant).collect();
        let (main, min) = dequant_rows(ty, w.bytes());
        let mut dots = vec![0f32; rows * n_tokens];
        kernels::matmul_with(CpuPath::Scalar, &wm, &act, &mut dots).unwrap();
        for p in CpuPath::available() {
            let mut got = vec![f32::NAN; rows * n_tokens];
            kernels::matmul_with(p, &wm, &act, &mut got).unwrap();
            for t in 0..n_tokens {
                for r in 0..rows {
                    let want = dots[t * rows + r];
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
    // Every quantized type of the registry, by its activation format.
    for ty in types() {
        if matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
            continue;
        }
        if ty.block_size() == QK_K {
            let (quant, dequant, ks) =
                (q8_k_of as fn(&[f32]) -> _, dequant_q8_k as fn(&_) -> _, big);
            check_tiles(
                TileCase {
                    ty,
                    quant,
                    dequant,
                    ks,
                },
                &mut rng,
            );
        } else {
            let (quant, dequant, ks) = (
                q8_0_of as fn(&[f32]) -> _,
                dequant_q8_0 as fn(&_) -> _,
                small,
            );
            check_tiles(
                TileCase {
                    ty,
                    quant,
                    dequant,
                    ks,
                },
                &mut rng,
            );
        }
    }
    // Float rows: lengths that end in partial SIMD slices, and one shorter than a slice.
    let float_ks: &[usize] = &[1, 7, 16, 33, 100, 1000];
    check_tiles(
        TileCase {
            ty: GgmlType::F32,
            quant: |x| x.to_vec(),
            dequant: |a| vec![*a as f64],
            ks: float_ks,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::F16,
            quant: |x| x.iter().map(|&v| f16::from_f32(v)).collect(),
            dequant: |a| vec![a.to_f64()],
            ks: float_ks,
        },
        &mut rng,
    );
    check_tiles(
        TileCase {
            ty: GgmlType::BF16,
            quant: |x| x.iter().map(|&v| bf16::from_f32(v)).collect(),
            dequant: |a| vec![a.to_f64()],
            ks: float_ks,
        },
        &mut rng,
    );
}
