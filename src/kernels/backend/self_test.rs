//! The start-up self-test: every op of a backend and every registered weight type's kernels
//! on its path, against the scalar twins, on small deterministic inputs.

use half::f16;

use super::{paths, Backend};
use crate::kernels::cpu::CpuPath;
use crate::kernels::ops::f32_gemm::{GemmShape, Strided};
use crate::kernels::types::{compare, test_bits, REGISTRY};
use crate::kernels::AttnScore;
use crate::quant::blocks::{BlockQ4_0, BlockQ8K, BlockQ8_0};

pub(super) fn run(b: &Backend) -> Result<(), String> {
    if !b.path.is_available() {
        return Err(format!("{} is not supported by this CPU", b.path));
    }
    if b.path == CpuPath::Scalar {
        return Ok(());
    }
    ops(b, &paths::SCALAR)?;
    for kind in REGISTRY {
        kind.self_test(b.path)?;
    }
    Ok(())
}

/// Bits of every value, to compare ops that promise the scalar twin's bits.
fn same_bits(name: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    match got
        .iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits())
    {
        None if got.len() == want.len() => Ok(()),
        at => Err(format!("{name}: differs at {at:?}")),
    }
}

fn ops(b: &Backend, s: &Backend) -> Result<(), String> {
    let mut bits = test_bits(0x2545_f491_4f6c_dd1d);
    let mut uniform = move |scale: f32| (bits() >> 40) as f32 / (1u64 << 23) as f32 * scale - scale;
    // 3 blocks of 256 plus a tail, so every loop sees its remainder.
    const N: usize = 3 * 256 + 13;
    let x: Vec<f32> = (0..N).map(|_| uniform(4.0)).collect();
    let y: Vec<f32> = (0..N).map(|_| uniform(1.0)).collect();

    let body = 3 * 256;
    let zero8 = BlockQ8_0 {
        d: f16::ZERO,
        qs: [0; 32],
    };
    let (mut q, mut qs) = (vec![zero8; body / 32], vec![zero8; body / 32]);
    b.quantize_q8_0(&x[..body], &mut q);
    s.quantize_q8_0(&x[..body], &mut qs);
    let same = q.iter().zip(&qs).all(|(a, c)| a.d == c.d && a.qs == c.qs);
    same.then_some(()).ok_or("quantize_q8_0 differs")?;
    let zk = BlockQ8K {
        d: 0.0,
        qs: [0; 256],
        bsums: [0; 16],
    };
    let (mut k, mut ks) = (vec![zk; 3], vec![zk; 3]);
    b.quantize_q8_k(&x[..body], &mut k);
    s.quantize_q8_k(&x[..body], &mut ks);
    let same = k
        .iter()
        .zip(&ks)
        .all(|(a, c)| a.d.to_bits() == c.d.to_bits() && a.qs == c.qs);
    (same && k.iter().zip(&ks).all(|(a, c)| a.bsums == c.bsums))
        .then_some(())
        .ok_or("quantize_q8_k differs")?;

    let h: Vec<f16> = y.iter().map(|&v| f16::from_f32(v)).collect();
    same_bits("f16_dot", &[b.f16_dot(&x, &h)], &[s.f16_dot(&x, &h)])?;
    let widen = |acc: &[f16]| acc.iter().map(|v| v.to_f32()).collect::<Vec<_>>();
    let (mut m, mut ms) = (h.clone(), h.clone());
    b.f16_mad(&mut m, &h, 0.37);
    s.f16_mad(&mut ms, &h, 0.37);
    b.f16_scale(&mut m, -1.7);
    s.f16_scale(&mut ms, -1.7);
    same_bits("f16_mad, f16_scale", &widen(&m), &widen(&ms))?;
    let (mut r, mut rs) = (vec![0f32; N], vec![0f32; N]);
    b.f16_row_to_f32(&h, &mut r);
    s.f16_row_to_f32(&h, &mut rs);
    same_bits("f16_row_to_f32", &r, &rs)?;

    // Attention over 5 cached rows of 64 (keys and values interleaved in one buffer).
    let (d, rows) = (64, 5);
    let cache: Vec<f16> = (0..2 * d * rows).map(|i| h[i % N]).collect();
    let q16: Vec<f32> = x[..d].iter().map(|&v| f16::from_f32(v).to_f32()).collect();
    let (mut o, mut os) = (vec![0f32; d], vec![0f32; d]);
    b.f16_attend(
        &q16,
        &cache,
        &cache[d..],
        (2 * d, 2 * d),
        0..rows,
        AttnScore {
            scale: 0.125,
            softcap: 2.0,
            sink: 0.75,
        },
        &mut o,
    );
    s.f16_attend(
        &q16,
        &cache,
        &cache[d..],
        (2 * d, 2 * d),
        0..rows,
        AttnScore {
            scale: 0.125,
            softcap: 2.0,
            sink: 0.75,
        },
        &mut os,
    );
    same_bits("f16_attend", &o, &os)?;

    // Tiled attention rows: 3 queries × 7 rows of 45 (a masked tail on every path).
    let (d, nq, nr) = (45, 3, 7);
    let (mut dots, mut dots_s) = (vec![0f32; nq * nr], vec![0f32; nq * nr]);
    b.f32_dots(&x[..nq * d], d, &y[..nr * d], &mut dots, nr);
    s.f32_dots(&x[..nq * d], d, &y[..nr * d], &mut dots_s, nr);
    compare("f32_dots", &dots, &dots_s)?;
    let (mut acc, mut acc_s) = (x[..nq * d].to_vec(), x[..nq * d].to_vec());
    b.f32_weighted_sum(&mut acc, d, &y[..nr * d], &dots_s, nr);
    s.f32_weighted_sum(&mut acc_s, d, &y[..nr * d], &dots_s, nr);
    same_bits("f32_weighted_sum", &acc, &acc_s)?;

    // Attention tile product: 7 × 21 (a partial last vector on every path) over 9, `A`
    // transposed.
    let shape = GemmShape {
        m: 7,
        n: 21,
        k: 9,
        ldb: 23,
        ldc: 22,
        accumulate: true,
    };
    let a = Strided {
        data: &x[..63],
        row: 1,
        step: 7,
    };
    let (mut c, mut cs) = (y[..7 * 22].to_vec(), y[..7 * 22].to_vec());
    b.f32_gemm(a, &x[..9 * 23], &mut c, shape);
    s.f32_gemm(a, &x[..9 * 23], &mut cs, shape);
    same_bits("f32_gemm", &c, &cs)?;

    // Quantized KV blocks widened (the Q8_0 blocks above; Q4_0 bytes of every value).
    let (mut w, mut ws) = (vec![0f32; body], vec![0f32; body]);
    b.q8_0_to_f32(&q, &mut w);
    s.q8_0_to_f32(&q, &mut ws);
    same_bits("q8_0_to_f32", &w, &ws)?;
    let q4: Vec<BlockQ4_0> = (0..body / 32)
        .map(|i| BlockQ4_0 {
            d: h[i],
            qs: std::array::from_fn(|j| (i * 16 + j * 37) as u8),
        })
        .collect();
    b.q4_0_to_f32(&q4, &mut w);
    s.q4_0_to_f32(&q4, &mut ws);
    same_bits("q4_0_to_f32", &w, &ws)?;

    let (mut e, mut es) = (x.clone(), x.clone());
    let sums = [
        b.exp_shifted_sum(&mut e, 1.5),
        s.exp_shifted_sum(&mut es, 1.5),
    ];
    same_bits(
        "exp_shifted_sum",
        &[&e[..], &sums[..1]].concat(),
        &[&es[..], &sums[1..]].concat(),
    )?;
    let (mut g, mut gs) = (x.clone(), x.clone());
    b.swiglu(&mut g, &y);
    s.swiglu(&mut gs, &y);
    same_bits("swiglu", &g, &gs)?;
    let (mut g, mut gs) = (x.clone(), x.clone());
    b.geglu(&mut g, &y);
    s.geglu(&mut gs, &y);
    same_bits("geglu", &g, &gs)
}
