//! In-place kernels (`kernels::matmul`: dot per row for one token, 1×8 tiles for batches)
//! against the 8-row interleaved layouts (`kernels::matmul_packed`), one thread, AVX2, and the
//! AVX-512 VNNI two-group kernels where the CPU has them, for 1, 4, 5, 8 and 64 tokens: Q5_0 and Q8_0 on a 4864 × 896 matrix (the 0.5B model's FFN), Q4_K and Q6_K on
//! 8960 × 1536 (the 1.5B model's).
//! `cargo bench --bench interleaved`; prints ms per matmul (best of 20).

use std::time::Instant;

use kolibri::kernels::{self, CpuPath, QuantizedActivations, WeightMatrix};
use kolibri::quant::GgmlType;

fn main() {
    if !CpuPath::Avx2.is_available() {
        eprintln!("no AVX2: nothing to compare");
        return;
    }
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    println!("one thread, ms per matmul (best of 20)");
    let wide = CpuPath::Avx512.is_available();
    println!(
        "| type | rows x k | tokens | in place | interleaved x8 | speedup | avx512 x16 | vs x8 | amx | vs x16 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // (type, rows, k, byte offsets of the block's f16 scales)
    let cases: [(GgmlType, usize, usize, &[usize]); 4] = [
        (GgmlType::Q5_0, 4864, 896, &[0]),
        (GgmlType::Q8_0, 4864, 896, &[0]),
        (GgmlType::Q4_K, 8960, 1536, &[0, 2]),
        (GgmlType::Q6_K, 8960, 1536, &[208]),
    ];
    for (ty, rows, k, scales) in cases {
        let (block_len, block_bytes) = ty.block_geometry();
        // Random bytes with small positive f16 scales.
        let mut raw: Vec<u8> = (0..rows * k / block_len * block_bytes)
            .map(|_| next() as u8)
            .collect();
        for b in raw.chunks_exact_mut(block_bytes) {
            for &o in scales {
                b[o..o + 2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
            }
        }
        // Blocks need 2-byte alignment: copy into u16 storage.
        let store: Vec<u16> = raw
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        // SAFETY: reinterpreting initialised u16s as bytes.
        let data = unsafe { std::slice::from_raw_parts(store.as_ptr() as *const u8, raw.len()) };
        let wm = WeightMatrix { ty, rows, k, data };
        let packed = kernels::repack(ty, data, rows, k, &|_| {}).unwrap();
        for n in [1usize, 2, 4, 5, 6, 8, 16, 64, 256] {
            let x: Vec<f32> = (0..n * k)
                .map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
                .collect();
            let act = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
            let (mut want, mut got) = (vec![0f32; n * rows], vec![0f32; n * rows]);
            let old = best(|| {
                pool.install(|| kernels::matmul_with(CpuPath::Avx2, &wm, &act, &mut want))
                    .unwrap()
            });
            let new = best(|| {
                pool.install(|| kernels::matmul_packed_with(CpuPath::Avx2, &packed, &act, &mut got))
                    .unwrap()
            });
            let err = want
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
                .fold(0f32, f32::max);
            assert!(err < 1e-3, "results differ: {err}");
            let mut wide_got = vec![0f32; n * rows];
            let x16 = if wide {
                let ms = best(|| {
                    pool.install(|| {
                        let avx512 = CpuPath::Avx512;
                        kernels::matmul_packed_with(avx512, &packed, &act, &mut wide_got)
                    })
                    .unwrap()
                });
                assert!(wide_got == got, "avx512 and avx2 results differ");
                format!("{ms:.3} | {:.2}x", new / ms)
            } else {
                "- | -".to_string()
            };
            let tiles = if CpuPath::Amx.is_available() && n >= 16 {
                let mut tiles_got = vec![0f32; n * rows];
                let ms = best(|| {
                    pool.install(|| {
                        kernels::matmul_packed_with(CpuPath::Amx, &packed, &act, &mut tiles_got)
                    })
                    .unwrap()
                });
                assert!(tiles_got == wide_got, "amx and avx512 results differ");
                let x16_ms = x16.split(' ').next().unwrap().parse::<f64>().unwrap();
                format!("{ms:.3} | {:.2}x", x16_ms / ms)
            } else {
                "- | -".to_string()
            };
            println!(
                "| {ty} | {rows} x {k} | {n} | {old:.3} | {new:.3} | {:.2}x | {x16} | {tiles} |",
                old / new
            );
        }
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
