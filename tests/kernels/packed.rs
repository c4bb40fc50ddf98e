//! The 8-row repacked layouts on every path against the in-place scalar dot, and AMX against
//! the AVX-512 vector kernels.

use kolibri::kernels::{self, CpuPath, QuantizedActivations};
use kolibri::quant::GgmlType;

use super::*;

/// The types with an 8-row layout.
fn layout_types() -> Vec<GgmlType> {
    let types: Vec<GgmlType> = kernels::types::REGISTRY
        .iter()
        .filter(|k| k.layout().is_some())
        .map(|k| k.ty())
        .collect();
    assert!(types.len() >= 4, "{types:?}");
    types
}

/// Every type with an 8-row layout (the registry's): the scalar twin and every SIMD
/// path through `matmul_packed_with` against the in-place scalar dot per (row, token), on
/// shapes with a partial last group and token counts that use every kernel width; row lookups
/// against the in-place dequantization.
#[test]
fn interleaved_layouts_match_in_place_dot() {
    use kolibri::quant::dequantize_row;
    let mut rng = Rng(42);
    for ty in layout_types() {
        let shapes: &[(usize, usize, usize)] = match ty.block_size() == 256 {
            true => &[
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
            let packed = kernels::repack(ty, w.bytes(), rows, k, &|_| {}).unwrap();
            let x = rng.floats(n * k, 1.0);
            let act = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
            let rb = w.bytes().len() / rows;
            let dot = |r: usize, t: usize| {
                let wr = &w.bytes()[r * rb..(r + 1) * rb];
                scalar_dot(ty, wr, k, &x[t * k..(t + 1) * k])
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
        assert!(kernels::repack(GgmlType::F16, &[0; 512], 1, 256, &|_| {}).is_none());
        assert!(kernels::repack(ty, &[0; 34], 2, 32, &|_| {}).is_none());
    }
}

/// The AMX tile kernels (batches of 16 tokens and more) against the AVX-512 vector kernels,
/// bit for bit, and against the in-place scalar dot: whole and partial token tiles, odd group
/// counts, a partial last group and weight panels split over several passes.
#[cfg(target_arch = "x86_64")]
#[test]
fn amx_tiles_match_vector_kernels_bit_for_bit() {
    if !CpuPath::Amx.is_available() {
        eprintln!("no AMX-INT8 here: nothing to compare");
        return;
    }
    let mut rng = Rng(7);
    for ty in layout_types() {
        let shapes: &[(usize, usize, usize)] = match ty.block_size() == 256 {
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
            let packed = kernels::repack(ty, w.bytes(), rows, k, &|_| {}).unwrap();
            let x = rng.floats(n * k, 1.0);
            let act = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
            let run = |path: CpuPath| {
                let mut got = vec![f32::NAN; n * rows];
                kernels::matmul_packed_with(path, &packed, &act, &mut got).unwrap();
                got
            };
            let (tiles, vector) = (run(CpuPath::Amx), run(CpuPath::Avx512));
            assert!(
                same_bits(&tiles, &vector, f32::to_bits),
                "{ty} rows {rows} k {k} n {n}: AMX differs from AVX-512"
            );
            let rb = w.bytes().len() / rows;
            for t in [0, n / 2, n - 1] {
                for r in 0..rows {
                    let wr = &w.bytes()[r * rb..(r + 1) * rb];
                    let want = scalar_dot(ty, wr, k, &x[t * k..(t + 1) * k]);
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

/// Every layout through the repack cache: stored, loaded back from the mapped file (each
/// array where `from_mapped` expects it), the same bytes and the same products.
#[test]
fn every_layout_round_trips_through_the_repack_cache() {
    use kolibri::model::repack_cache::{RepackCache, Wanted};
    let dir = std::env::temp_dir().join(format!("kolibri-kpack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.gguf");
    let file = b"not a model: only its identity matters".to_vec();
    std::fs::write(&model, &file).unwrap();
    let parts = kolibri::gguf::SplitSet::from_paths(vec![model]).unwrap();
    let cache = RepackCache::new(&dir, &parts, &file).unwrap();
    let mut rng = Rng(5);
    for ty in layout_types() {
        let (rows, k, n) = (19, 512, 3);
        let w = random_weights(ty, rows, k, &mut rng);
        let packed = kernels::repack(ty, w.bytes(), rows, k, &|_| {}).unwrap();
        let wanted = [Wanted {
            name: "blk.0.ffn_up.weight",
            ty,
            rows,
            k,
        }];
        cache.store(&wanted, &[packed.as_ref()]).unwrap();
        // Paged: checked piece by piece, each piece released again; the same matrix.
        let paged = cache
            .load(&wanted, true)
            .unwrap_or_else(|| panic!("{ty}: cache miss (paged)"));
        assert_eq!(paged[0].arrays(), packed.arrays(), "{ty}");
        let loaded = cache
            .load(&wanted, false)
            .unwrap_or_else(|| panic!("{ty}: cache miss"));
        assert_eq!(loaded[0].arrays(), packed.arrays(), "{ty}");
        let x = rng.floats(n * k, 1.0);
        let act = QuantizedActivations::quantize(&x, n, k, ty).unwrap();
        let run = |m: &std::sync::Arc<dyn kernels::PackedWeights>| {
            let mut out = vec![f32::NAN; n * rows];
            kernels::matmul_packed(m, &act, &mut out).unwrap();
            out
        };
        assert!(
            same_bits(&run(&loaded[0]), &run(&packed), f32::to_bits),
            "{ty}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
