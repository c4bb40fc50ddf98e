//! Q5_0 matmul on one thread: the in-place kernels (`kernels::matmul`, dot per row for one
//! token, 1×8 tiles for batches) against the 8-row interleaved layout, for 1, 4 and 8 tokens.
//! `cargo bench --bench interleaved`; prints ms per matmul (best of several repetitions).

use std::time::Instant;

use half::f16;
use kolibri::kernels::interleaved::{block_sums, Q5_0x8, GROUP};
use kolibri::kernels::{self, CpuPath, QuantizedActivations, WeightMatrix};
use kolibri::quant::blocks::{BlockQ5_0, BlockQ8_0};
use kolibri::quant::GgmlType;

fn main() {
    if !CpuPath::Avx2.is_available() {
        eprintln!("no AVX2: nothing to compare");
        return;
    }
    let (rows, k) = (4864, 896);
    let nb = k / 32;
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let w: Vec<BlockQ5_0> = (0..rows * nb)
        .map(|_| {
            let v = next().to_le_bytes();
            let u = next().to_le_bytes();
            let mut qs = [0u8; 16];
            qs[..8].copy_from_slice(&v);
            qs[8..].copy_from_slice(&u);
            BlockQ5_0 {
                d: f16::from_f32(0.01 + (next() % 100) as f32 * 1e-4),
                qh: (next() as u32).to_le_bytes(),
                qs,
            }
        })
        .collect();
    // SAFETY: BlockQ5_0 is repr(C) plain data without padding.
    let raw = unsafe {
        std::slice::from_raw_parts(w.as_ptr() as *const u8, std::mem::size_of_val(&w[..]))
    };
    let wm = WeightMatrix {
        ty: GgmlType::Q5_0,
        rows,
        k,
        data: raw,
    };
    let packed = Q5_0x8::repack(&w, rows, k);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    println!("Q5_0 {rows} x {k}, one thread, ms per matmul (best of 20)");
    println!("| tokens | in place | interleaved x8 | speedup |");
    println!("|---|---|---|---|");
    for n in [1usize, 4, 8] {
        let x: Vec<f32> = (0..n * k)
            .map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect();
        let act = QuantizedActivations::quantize(&x, n, k, GgmlType::Q5_0).unwrap();
        let mut q8 = vec![
            BlockQ8_0 {
                d: f16::ZERO,
                qs: [0; 32]
            };
            n * nb
        ];
        for t in 0..n {
            kolibri::quant::activation::quantize_row_q8_0(
                &x[t * k..(t + 1) * k],
                &mut q8[t * nb..(t + 1) * nb],
            );
        }
        let sums = block_sums(&q8);
        let mut out = vec![0f32; n * rows];
        let old = best(|| {
            pool.install(|| kernels::matmul_with(CpuPath::Avx2, &wm, &act, &mut out).unwrap())
        });
        let want = out.clone();
        let mut got = vec![0f32; n * rows];
        let new = best(|| {
            for g in 0..packed.groups() {
                let mut put = |t: usize, o: &[f32; GROUP]| {
                    for (r, &v) in o.iter().enumerate() {
                        if g * GROUP + r < rows {
                            got[t * rows + g * GROUP + r] = v;
                        }
                    }
                };
                // SAFETY: AVX2 checked above; every token has nb blocks and sums.
                unsafe {
                    match n {
                        1 => {
                            let o = kolibri::kernels::avx2_interleaved::q5_0x8_group::<1>(
                                &packed,
                                g,
                                [&q8[..]],
                                [&sums[..]],
                            );
                            put(0, &o[0]);
                        }
                        _ => {
                            for t0 in (0..n).step_by(4) {
                                let a: [&[BlockQ8_0]; 4] =
                                    std::array::from_fn(|j| &q8[(t0 + j) * nb..(t0 + j + 1) * nb]);
                                let s: [&[i32]; 4] = std::array::from_fn(|j| {
                                    &sums[(t0 + j) * nb..(t0 + j + 1) * nb]
                                });
                                let o = kolibri::kernels::avx2_interleaved::q5_0x8_group::<4>(
                                    &packed, g, a, s,
                                );
                                for (j, o) in o.iter().enumerate() {
                                    put(t0 + j, o);
                                }
                            }
                        }
                    }
                }
            }
        });
        let err = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
            .fold(0f32, f32::max);
        assert!(err < 1e-3, "results differ: {err}");
        println!("| {n} | {old:.3} | {new:.3} | {:.2}x |", old / new);
    }
}

fn best(mut f: impl FnMut()) -> f64 {
    f();
    (0..20)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}
