//! The backends' other ops against the scalar ones: attention rows and the f16 accumulator.

use half::f16;
use kolibri::kernels::{AttnScore, Backend};

use super::*;

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
        let want = scalar().f16_dot(&q, &k);
        let body = len / 8 * 8;
        let mut lanes = [0f32; 8];
        for i in 0..body {
            lanes[i % 8] += q[i] * k[i].to_f32();
        }
        let tail: f32 = (body..len).map(|i| q[i] * k[i].to_f32()).sum();
        assert_eq!(want.to_bits(), (lanes.iter().sum::<f32>() + tail).to_bits());
        for b in Backend::available() {
            let path = b.path();
            let got = b.f16_dot(&q, &k);
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
    // The fourth case soft-caps the scores (Gemma 2) at a cap the scores reach; the last two
    // add an attention sink (gpt-oss) below the scores and far above them.
    let cases = [
        (64, 2, 1, 0..37, 0.0, f32::NEG_INFINITY),
        (256, 1, 0, 5..9, 0.0, f32::NEG_INFINITY),
        (80, 3, 2, 0..1, 0.0, f32::NEG_INFINITY),
        (64, 1, 0, 0..29, 1.5, f32::NEG_INFINITY),
        (64, 2, 0, 0..40, 0.0, -0.5),
        (64, 2, 1, 3..20, 0.0, 6.0),
    ];
    for (hd, n_kv, kvh, rows, softcap, sink) in cases {
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
        let score = AttnScore {
            scale,
            softcap,
            sink,
        };
        let mut want = vec![0f32; hd];
        scalar().f16_attend(&q16, k0, v0, stride, rows.clone(), score, &mut want);
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
            .map(|s| match softcap as f64 {
                0.0 => s,
                cap => cap * (s / cap).tanh(),
            })
            .collect();
        let max = scores.iter().cloned().fold(sink as f64, f64::max);
        let total: f64 =
            scores.iter().map(|s| (s - max).exp()).sum::<f64>() + (sink as f64 - max).exp();
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
        for b in Backend::available() {
            let path = b.path();
            let mut got = vec![f32::NAN; hd];
            b.f16_attend(&q16, k0, v0, stride, rows.clone(), score, &mut got);
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
        scalar().f16_mad(&mut want, &v, w);
        scalar().f16_scale(&mut want, s);
        // The scalar twin is ggml's formula: one rounding of the fused v * w + acc.
        for i in 0..len {
            let fused = f16::from_f32(v[i].to_f32().mul_add(w, start[i].to_f32()));
            assert_eq!(want[i], f16::from_f32(fused.to_f32() * s));
        }
        for b in Backend::available() {
            let path = b.path();
            let mut got = start.clone();
            b.f16_mad(&mut got, &v, w);
            b.f16_scale(&mut got, s);
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
            b.f16_row_to_f32(&h, &mut wide);
            for (x, y) in h.iter().zip(&wide) {
                assert!(x.to_f32().to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()));
            }
        }
    }
}

/// The tiled attention's f32 row kernels: several queries per call (more than 8 too, odd
/// lengths with tails, strided outputs), SIMD against the scalar versions.
#[test]
fn attention_row_kernels_match_scalar() {
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
        let mut want = vec![0f32; n_q * stride];
        scalar().f32_dots(&q, d, &rows, &mut want, stride);
        let w = rng.floats(n_q * stride, 1.0);
        let acc0 = rng.floats(n_q * d, 1.0);
        let mut want_sum = acc0.clone();
        scalar().f32_weighted_sum(&mut want_sum, d, &rows, &w, stride);
        for b in Backend::available() {
            let path = b.path();
            // Entries between the rows of a strided output stay untouched.
            let mut got = vec![0f32; n_q * stride];
            b.f32_dots(&q, d, &rows, &mut got, stride);
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * d as f32,
                    "{path} dots {n_q}x{d}x{n}: {g} vs {w}"
                );
            }
            let mut got = acc0.clone();
            b.f32_weighted_sum(&mut got, d, &rows, &w, stride);
            assert_eq!(got, want_sum, "{path} weighted sum {n_q}x{d}x{n}");
        }
    }
}

/// The Gated DeltaNet row step: every path against the scalar twin, for head sizes with and
/// without a tail, over several tokens (the state carried from one to the next).
#[test]
fn delta_rows_match_scalar() {
    let mut rng = Rng(11);
    for &(hk, hv) in &[(128, 128), (32, 32), (20, 7), (8, 3), (3, 5)] {
        let s0 = rng.floats(hk * hv, 0.5);
        let steps: Vec<_> = (0..6)
            .map(|t| {
                let (q, k, v) = (
                    rng.floats(hk, 0.3),
                    rng.floats(hk, 0.3),
                    rng.floats(hv, 1.0),
                );
                (
                    q,
                    k,
                    v,
                    [0.6 + 0.05 * t as f32, 0.5, 1.0 / (hk as f32).sqrt()],
                )
            })
            .collect();
        let run = |b: &Backend| {
            let (mut s, mut outs) = (s0.clone(), Vec::new());
            for (q, k, v, gates) in &steps {
                let mut o = vec![0f32; hv];
                b.delta_rows(&mut s, q, k, v, *gates, &mut o);
                outs.extend(o);
            }
            (s, outs)
        };
        let (want_s, want_o) = run(scalar());
        for b in Backend::available() {
            let (s, o) = run(b);
            let close = |a: &[f32], w: &[f32]| {
                a.iter()
                    .zip(w)
                    .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
            };
            assert!(close(&s, &want_s), "{} state {hk}x{hv}", b.path());
            assert!(close(&o, &want_o), "{} outputs {hk}x{hv}", b.path());
        }
    }
}
