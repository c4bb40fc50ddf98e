//! Bit-exact check of the scalar dequantizers against gguf-py.
//!
//! Fixtures come from `scripts/gen_quant_fixtures.py` (layout documented there): u32 type id,
//! u32 n_blocks, the raw blocks, then gguf-py's f32 outputs. Comparison is on f32 bit patterns,
//! so -0.0 and 0.0 must match too. gguf-py computes in f32 with one rounding per numpy op and
//! no FMA, exactly like our scalar code, so no tolerance is needed for any type.

use std::path::PathBuf;

use kolibri::quant::dequant::get_scale_min_k4;
use kolibri::quant::{dequantize_row, DequantError, GgmlType};

const TYPES: [GgmlType; 16] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::MXFP4,
];

struct Fixture {
    raw: Vec<u8>,
    expected: Vec<f32>,
}

fn load(ty: GgmlType) -> Fixture {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "data", "quant"]
        .iter()
        .collect::<PathBuf>()
        .join(format!("{}.bin", ty.name()));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    assert_eq!(u32_at(0), ty.id(), "{}: type id", path.display());
    let n_blocks = u32_at(4) as usize;
    let (block_size, type_size) = ty.block_geometry();
    let raw_end = 8 + n_blocks * type_size;
    let n = n_blocks * block_size;
    assert_eq!(
        bytes.len(),
        raw_end + 4 * n,
        "{}: file size",
        path.display()
    );
    let expected = bytes[raw_end..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    Fixture {
        raw: bytes[8..raw_end].to_vec(),
        expected,
    }
}

/// Asserts bit equality, reporting the first few differing elements.
fn assert_bits_eq(ty: GgmlType, what: &str, got: &[f32], expected: &[f32]) {
    assert_eq!(got.len(), expected.len());
    let bad: Vec<String> = got
        .iter()
        .zip(expected)
        .enumerate()
        .filter(|(_, (g, e))| g.to_bits() != e.to_bits())
        .take(8)
        .map(|(i, (g, e))| {
            format!(
                "[{i}] got {g:e} ({:#010x}) want {e:e} ({:#010x})",
                g.to_bits(),
                e.to_bits()
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{ty} {what}: mismatches:\n{}",
        bad.join("\n")
    );
}

#[test]
fn matches_gguf_py_bit_exactly() {
    for ty in TYPES {
        let fx = load(ty);
        let mut out = vec![f32::NAN; fx.expected.len()];
        dequantize_row(ty, &fx.raw, &mut out).unwrap();
        assert_bits_eq(ty, "aligned", &out, &fx.expected);

        // GGUF data handed to us need not be 2-aligned: same result from an odd address.
        let mut shifted = vec![0u8; fx.raw.len() + 1];
        shifted[1..].copy_from_slice(&fx.raw);
        let mut out = vec![f32::NAN; fx.expected.len()];
        dequantize_row(ty, &shifted[1..], &mut out).unwrap();
        assert_bits_eq(ty, "misaligned", &out, &fx.expected);

        // Row-by-row (one block at a time) equals the whole-tensor call.
        let (block_size, type_size) = ty.block_geometry();
        for (b, chunk) in fx.raw.chunks_exact(type_size).enumerate() {
            let mut one = vec![f32::NAN; block_size];
            dequantize_row(ty, chunk, &mut one).unwrap();
            let want = &fx.expected[b * block_size..(b + 1) * block_size];
            assert_bits_eq(ty, "per block", &one, want);
        }
    }
}

/// The quantizers of the types gguf-py quantizes write its blocks byte for byte (ggml's
/// reference rounding: round-half-away scales, truncating offsets; MXFP4's exponent of the
/// largest magnitude and first-nearest codes).
#[test]
fn quantizers_match_gguf_py_byte_exactly() {
    use kolibri::quant::encode::quantize_row;
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::MXFP4,
    ] {
        let path = format!(
            "{}/tests/data/quant/quantize-{}.bin",
            env!("CARGO_MANIFEST_DIR"),
            ty.name()
        );
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
        assert_eq!(u32_at(0), ty.id(), "{path}");
        let n = u32_at(4) as usize;
        let x: Vec<f32> = bytes[8..8 + 4 * n]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want = &bytes[8 + 4 * n..];
        let mut got = vec![0u8; want.len()];
        quantize_row(ty, &x, &mut got).unwrap();
        let type_size = ty.type_size();
        let bad: Vec<usize> = (0..want.len() / type_size)
            .filter(|b| got[b * type_size..][..type_size] != want[b * type_size..][..type_size])
            .collect();
        assert!(bad.is_empty(), "{ty}: blocks {bad:?} differ from gguf-py");
    }
}

#[test]
fn fixtures_cover_signed_zeros_and_stay_small() {
    let mut total = 0;
    let mut neg_zero = 0;
    for ty in TYPES {
        let fx = load(ty);
        total += fx.raw.len() + 4 * fx.expected.len();
        neg_zero += fx
            .expected
            .iter()
            .filter(|x| x.to_bits() == 0x8000_0000)
            .count();
    }
    assert!(total < 256 * 1024, "fixtures are {total} bytes");
    assert!(neg_zero > 0, "fixtures should exercise -0.0");
}

#[test]
fn rejects_bad_lengths() {
    for ty in TYPES {
        let (block_size, type_size) = ty.block_geometry();
        let src = vec![0u8; 2 * type_size];
        let mut dst = vec![0f32; 2 * block_size];

        // Empty input is a valid zero-length row.
        assert_eq!(dequantize_row(ty, &[], &mut []), Ok(()));
        let err = dequantize_row(ty, &src[..src.len() - 1], &mut dst).unwrap_err();
        assert!(
            matches!(err, DequantError::LengthMismatch { .. }),
            "{ty}: {err}"
        );
        let long = vec![0u8; src.len() + type_size];
        let err = dequantize_row(ty, &long, &mut dst).unwrap_err();
        assert!(
            matches!(err, DequantError::LengthMismatch { .. }),
            "{ty}: {err}"
        );
        assert!(err.to_string().contains(ty.name()), "{err}");

        if block_size > 1 {
            let err = dequantize_row(ty, &src, &mut dst[..2 * block_size - 1]).unwrap_err();
            assert!(
                matches!(err, DequantError::PartialBlock { .. }),
                "{ty}: {err}"
            );
        }
        // Errors leave dst untouched.
        assert!(dst.iter().all(|&x| x.to_bits() == 0));
    }
}

#[test]
fn rejects_unsupported_types() {
    use GgmlType::*;
    for ty in [
        Q8_1, Q8_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, IQ1_M, I8, I16, I32, I64, F64,
        TQ1_0, TQ2_0,
    ] {
        let (block_size, type_size) = ty.block_geometry();
        let src = vec![0u8; type_size];
        let mut dst = vec![0f32; block_size];
        let err = dequantize_row(ty, &src, &mut dst).unwrap_err();
        assert_eq!(err, DequantError::Unsupported(ty));
        assert!(err.to_string().contains(ty.name()), "{err}");
    }
}

/// Packs 6-bit (scale, min) pairs the way ggml's Q4_K quantizer does, independently of the
/// unpacker under test.
fn pack_scale_min(sc: [u8; 8], m: [u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..8 {
        if j < 4 {
            q[j] = sc[j];
            q[j + 4] = m[j];
        } else {
            q[j + 4] = (sc[j] & 0x0F) | ((m[j] & 0x0F) << 4);
            q[j - 4] |= (sc[j] >> 4) << 6;
            q[j] |= (m[j] >> 4) << 6;
        }
    }
    q
}

#[test]
fn scale_min_k4_roundtrips_all_values() {
    for v in 0..64usize {
        let sc: [u8; 8] = std::array::from_fn(|j| ((v + 7 * j) % 64) as u8);
        let m: [u8; 8] = std::array::from_fn(|j| ((v * 3 + 11 * j) % 64) as u8);
        let q = pack_scale_min(sc, m);
        for j in 0..8 {
            assert_eq!(get_scale_min_k4(j, &q), (sc[j], m[j]), "v={v} j={j}");
        }
    }
}
