use super::*;
use crate::quant::dequantize_row;

/// Gaussian-like weights (sum of uniforms) with a few outliers, from a fixed seed.
fn weights(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    let mut uniform = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    (0..n)
        .map(|i| {
            let g = (0..4).map(|_| uniform()).sum::<f32>() * 0.05;
            if i % 97 == 13 {
                g * 6.0
            } else {
                g
            }
        })
        .collect()
}

fn round_trip(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    let mut bytes = vec![0u8; ty.row_bytes(x.len() as u64).unwrap() as usize];
    quantize_row(ty, x, &mut bytes).unwrap();
    let mut y = vec![0f32; x.len()];
    dequantize_row(ty, &bytes, &mut y).unwrap();
    y
}

/// Root-mean-square error of the round trip relative to the weights' RMS.
fn relative_rmse(ty: GgmlType, x: &[f32]) -> f32 {
    let y = round_trip(ty, x);
    let err: f64 = x
        .iter()
        .zip(&y)
        .map(|(a, b)| ((a - b) as f64).powi(2))
        .sum();
    let rms: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
    (err / rms).sqrt() as f32
}

/// Each type's round-trip error on gaussian weights with outliers stays within about 10% of
/// what it gave when these quantizers were checked block for block against llama-quantize,
/// and the types order by their bits per weight.
#[test]
fn round_trip_error_is_what_each_type_should_give() {
    use GgmlType::*;
    let x = weights(256 * 64, 7);
    let bounds = [
        (F32, 0.0),
        (BF16, 0.002),
        (F16, 0.0003),
        (Q8_0, 0.009),
        (Q6_K, 0.027),
        (Q5_K, 0.048),
        (Q5_1, 0.049),
        (Q5_0, 0.07),
        (Q4_K, 0.094),
        (IQ4_XS, 0.112),
        (IQ4_NL, 0.11),
        (Q4_1, 0.1),
        (Q4_0, 0.14),
        (Q3_K, 0.21),
        (Q2_K, 0.36),
    ];
    let mut report = String::new();
    let mut ok = true;
    for (ty, bound) in bounds {
        let e = relative_rmse(ty, &x);
        report += &format!("{ty}: {e:.4} (bound {bound})\n");
        ok &= e <= bound;
    }
    assert!(ok, "{report}");
    // More bits, less error (within a family).
    let e = |ty| relative_rmse(ty, &x);
    assert!(e(Q6_K) < e(Q5_K) && e(Q5_K) < e(Q4_K) && e(Q4_K) < e(Q3_K) && e(Q3_K) < e(Q2_K));
    assert!(e(Q8_0) < e(Q5_0) && e(Q5_0) < e(Q4_0) && e(Q5_1) < e(Q4_1));
}

/// The searched scales beat the plain range-based rounding they start from.
#[test]
fn scale_searches_beat_range_rounding() {
    let x = weights(256 * 16, 11);
    let plain_q4 = relative_rmse(GgmlType::Q4_1, &x);
    assert!(relative_rmse(GgmlType::Q4_K, &x) < plain_q4);
    assert!(relative_rmse(GgmlType::IQ4_NL, &x) < relative_rmse(GgmlType::Q4_0, &x));
}

/// Values a type represents exactly come back exactly: quantizing a dequantized row gives a
/// row that dequantizes to the same values (the fit finds the grid it came from).
#[test]
fn dequantized_rows_quantize_back_to_themselves() {
    // The K-quants' searches may settle on another nearby grid for a few groups.
    for (ty, percent) in [
        (GgmlType::Q8_0, 99),
        (GgmlType::Q4_0, 99),
        (GgmlType::Q6_K, 95),
    ] {
        let once = round_trip(ty, &weights(256 * 8, 3));
        let twice = round_trip(ty, &once);
        let same = once.iter().zip(&twice).filter(|(a, b)| a == b).count();
        assert!(
            same * 100 >= once.len() * percent,
            "{ty}: {same} of {}",
            once.len()
        );
    }
}

#[test]
fn zeros_and_constant_rows_give_finite_blocks() {
    for &ty in &QUANTIZABLE {
        for v in [0.0f32, 1.0, -3.5, 1e-20] {
            let x = vec![v; 256];
            let y = round_trip(ty, &x);
            assert!(y.iter().all(|v| v.is_finite()), "{ty} of {v}");
            let err = y.iter().map(|y| (y - v).abs()).fold(0.0f32, f32::max);
            assert!(err <= v.abs() * 0.15 + 1e-6, "{ty} of {v}: error {err}");
        }
    }
}

#[test]
fn bad_shapes_and_types_are_errors() {
    let x = vec![0.5f32; 48];
    let mut out = vec![0u8; 1000];
    assert!(matches!(
        quantize_row(GgmlType::Q4_K, &x, &mut out),
        Err(QuantizeError::PartialBlock { .. })
    ));
    assert!(matches!(
        quantize_row(GgmlType::Q4_0, &x[..32], &mut out),
        Err(QuantizeError::OutputSize { expected: 18, .. })
    ));
    assert_eq!(
        quantize_row(GgmlType::IQ2_XS, &x, &mut out),
        Err(QuantizeError::Unsupported(GgmlType::IQ2_XS))
    );
    assert!(quantize_row(GgmlType::Q4_0, &x[..32], &mut out[..18]).is_ok());
}

/// The fitted Q4_0 (for KV caches) has less error than the reference rounding, and its blocks
/// dequantize as Q4_0 does (an all-zero block to zeros).
#[test]
fn fitted_q4_0_beats_the_reference_rounding() {
    use crate::quant::blocks::{block_bytes, BlockQ4_0};
    let mut x = weights(32 * 64, 5);
    x[32..64].fill(0.0);
    let mut blocks = vec![
        BlockQ4_0 {
            d: half::f16::ZERO,
            qs: [0; 16]
        };
        64
    ];
    quantize_row_q4_0_fitted(&x, &mut blocks);
    let mut y = vec![0f32; x.len()];
    dequantize_row(GgmlType::Q4_0, block_bytes(&blocks), &mut y).unwrap();
    assert!(y[32..64].iter().all(|&v| v == 0.0), "a zero block");
    let err = |y: &[f32]| -> f64 { x.iter().zip(y).map(|(a, b)| f64::from(a - b).powi(2)).sum() };
    let (fitted, reference) = (err(&y), err(&round_trip(GgmlType::Q4_0, &x)));
    assert!(
        fitted < 0.95 * reference,
        "fitted {fitted} against the reference's {reference}"
    );
}
