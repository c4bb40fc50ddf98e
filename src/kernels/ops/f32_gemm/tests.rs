use super::*;
use crate::kernels::{Backend, CpuPath};

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

/// Every path against the scalar twin, bit for bit, over tile edges (rows past 6, columns
/// around each vector width and 64), row-major and transposed `A`, overwrite and accumulate.
#[test]
fn every_path_gives_the_scalar_bits() {
    let scalar = Backend::for_path(CpuPath::Scalar).unwrap();
    for b in Backend::available() {
        for (m, n, k) in [
            (1, 1, 1),
            (7, 21, 9),
            (13, 64, 64),
            (64, 112, 64),
            (5, 67, 3),
            (6, 16, 0),
        ] {
            for transposed in [false, true] {
                for accumulate in [false, true] {
                    let (ldb, ldc) = (n + 3, n + 1);
                    let a_data = values(m * k + 1, 1);
                    let a = if transposed {
                        Strided {
                            data: &a_data,
                            row: 1,
                            step: m,
                        }
                    } else {
                        Strided {
                            data: &a_data,
                            row: k,
                            step: 1,
                        }
                    };
                    let bm = values(k * ldb + 1, 2);
                    let c0 = values(m * ldc, 3);
                    let shape = GemmShape {
                        m,
                        n,
                        k,
                        ldb,
                        ldc,
                        accumulate,
                    };
                    let (mut got, mut want) = (c0.clone(), c0.clone());
                    b.f32_gemm(a, &bm, &mut got, shape);
                    scalar.f32_gemm(a, &bm, &mut want, shape);
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{} {shape:?} transposed {transposed}", b.path());
                }
            }
        }
    }
}

/// The scalar twin is the product (against f64 sums), and leaves the padding columns alone.
#[test]
fn scalar_twin_is_the_product() {
    let (m, n, k, ldc) = (3, 5, 4, 7);
    let a = values(m * k, 4);
    let bm = values(k * n, 5);
    let mut c = vec![9.0; m * ldc];
    let shape = GemmShape {
        m,
        n,
        k,
        ldb: n,
        ldc,
        accumulate: false,
    };
    f32_gemm(
        Strided {
            data: &a,
            row: k,
            step: 1,
        },
        &bm,
        &mut c,
        shape,
    );
    for i in 0..m {
        for j in 0..ldc {
            let want = if j < n {
                (0..k)
                    .map(|p| a[i * k + p] as f64 * bm[p * n + j] as f64)
                    .sum()
            } else {
                9.0
            };
            assert!((c[i * ldc + j] as f64 - want).abs() < 1e-5, "({i}, {j})");
        }
    }
}

#[test]
fn shapes_outside_their_slices_are_refused() {
    let a = vec![0.0; 12];
    let shape = GemmShape {
        m: 3,
        n: 4,
        k: 4,
        ldb: 4,
        ldc: 4,
        accumulate: false,
    };
    let ok = Strided {
        data: &a,
        row: 4,
        step: 1,
    };
    assert!(shape.fits(&ok, 16, 12));
    assert!(!shape.fits(&ok, 15, 12));
    assert!(!shape.fits(&ok, 16, 11));
    assert!(!shape.fits(
        &Strided {
            data: &a[..11],
            row: 4,
            step: 1
        },
        16,
        12
    ));
    assert!(
        !GemmShape { ldc: 3, ..shape }.fits(&ok, 16, 12),
        "overlapping rows of C"
    );
    let huge = Strided {
        data: &a,
        row: usize::MAX,
        step: 1,
    };
    assert!(!shape.fits(&huge, 16, 12));
}
