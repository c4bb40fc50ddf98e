//! The GGUF reader on valid, malformed and random input: typed errors, never a panic.

use kolibri::gguf::{GgufError, GgufFile, GgufWriter, Value, ValueType};
use kolibri::quant::GgmlType;

fn sample_strings() -> Vec<Value> {
    ["a", "", "ß✓"]
        .into_iter()
        .map(|s| Value::String(s.into()))
        .collect()
}

fn ints(v: &[i32]) -> Vec<Value> {
    v.iter().map(|&x| Value::I32(x)).collect()
}

/// A small valid file with every metadata value type, a nested array and three tensors.
fn sample_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", Value::String("llama".into()))
        .metadata("u8", Value::U8(7))
        .metadata("i8", Value::I8(-7))
        .metadata("u16", Value::U16(700))
        .metadata("i16", Value::I16(-700))
        .metadata("u32", Value::U32(70_000))
        .metadata("i32", Value::I32(-70_000))
        .metadata("f32", Value::F32(1.5))
        .metadata("bool", Value::Bool(true))
        .metadata("u64", Value::U64(1 << 40))
        .metadata("i64", Value::I64(-(1 << 40)))
        .metadata("f64", Value::F64(-2.25))
        .metadata("strings", Value::array(ValueType::String, sample_strings()))
        .metadata(
            "floats",
            Value::array(ValueType::F32, vec![Value::F32(0.5), Value::F32(-3.0)]),
        )
        .metadata(
            "small_ints",
            Value::array(ValueType::I32, ints(&[1, 6, -3, 127, -128])),
        )
        .metadata(
            "ints",
            Value::array(ValueType::I32, ints(&[1, 128, -129, -70_000, i32::MIN])),
        )
        .metadata(
            "nested",
            Value::array(
                ValueType::Array,
                vec![
                    Value::array(ValueType::I32, vec![Value::I32(1), Value::I32(2)]),
                    Value::array(ValueType::I32, vec![]),
                ],
            ),
        );
    w.tensor_f32("a", &[4, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    w.tensor("b", &[32], GgmlType::Q8_0, vec![1u8; 34]);
    w.tensor("c", &[3], GgmlType::F16, vec![0u8; 6]);
    w.to_bytes()
}

#[test]
fn reads_every_value_type_and_tensor() {
    let f = GgufFile::from_bytes(sample_file()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.get_str("general.architecture"), Some("llama"));
    assert_eq!(f.get("i8"), Some(&Value::I8(-7)));
    assert_eq!(f.get_u64("u32"), Some(70_000));
    assert_eq!(f.get("i64").and_then(Value::as_i64), Some(-(1 << 40)));
    assert_eq!(f.get_f32("f64"), Some(-2.25));
    assert_eq!(f.get_bool("bool"), Some(true));
    let strings = f.get_array("strings").unwrap();
    assert_eq!(
        (0..4).map(|i| strings.str(i)).collect::<Vec<_>>(),
        [Some("a"), Some(""), Some("ß✓"), None]
    );
    let floats = f.get_array("floats").unwrap();
    assert_eq!((floats.f32(1), floats.i64(0)), (Some(-3.0), None));
    // Arrays read back equal to what was written, packed or not.
    let written = Value::array(ValueType::String, sample_strings());
    assert_eq!(f.get("strings"), Some(&written));
    // i32 arrays read back exactly, whether their values fit a byte (stored so) or not.
    for (key, want) in [
        ("small_ints", &[1, 6, -3, 127, -128][..]),
        ("ints", &[1, 128, -129, -70_000, i32::MIN][..]),
    ] {
        let a = f.get_array(key).unwrap();
        let got: Vec<i64> = (0..a.len()).filter_map(|i| a.i64(i)).collect();
        assert_eq!(
            got,
            want.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            "{key}"
        );
        assert_eq!(a.get(4).as_deref(), Some(&Value::I32(want[4])), "{key}");
        assert_eq!(
            f.get(key),
            Some(&Value::array(ValueType::I32, ints(want))),
            "{key}"
        );
    }
    // A clone (the tokenizer's, of the token texts) shares the storage.
    let shared = strings.clone();
    assert_eq!(
        shared.str(2).map(str::as_ptr),
        strings.str(2).map(str::as_ptr)
    );
    let nested = f.get_array("nested").unwrap();
    let inner = nested.get(0).unwrap();
    assert_eq!(inner.as_array().unwrap().i64(1), Some(2));
    assert_eq!(nested.get(1).unwrap().as_array().map(|a| a.len()), Some(0));
    assert_eq!(f.tensors().len(), 3);
    let a = f.tensor("a").unwrap();
    assert_eq!(a.dims, vec![4, 2]);
    assert_eq!(f.tensor_data(a)[4..8], 2.0f32.to_le_bytes());
    let b = f.tensor("b").unwrap();
    assert_eq!(b.ggml_type, GgmlType::Q8_0);
    assert_eq!(f.tensor_data(b), &[1u8; 34][..]);
    assert_eq!((f.data_offset() + b.offset) % 32, 0, "tensor data aligned");
}

#[test]
fn large_f32_arrays_of_a_mapped_file_read_back_in_place_and_exactly() {
    // A vocabulary's scores: large enough to stay in the mapping, after an odd-length string
    // so the floats are unaligned in the file.
    let scores: Vec<f32> = (0..10_000).map(|i| -(i as f32) * 0.75 - 1e-3).collect();
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", Value::String("odd".into()))
        .metadata(
            "scores",
            Value::array(
                ValueType::F32,
                scores.iter().map(|&x| Value::F32(x)).collect(),
            ),
        )
        .metadata(
            "few",
            Value::array(ValueType::F32, vec![Value::F32(2.5), Value::F32(-1.0)]),
        );
    let bytes = w.to_bytes();
    let path = std::env::temp_dir().join(format!("kolibri-f32s-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let mapped = GgufFile::open(&path).unwrap();
    let copied = GgufFile::from_bytes(bytes).unwrap();
    std::fs::remove_file(&path).unwrap();
    for f in [&mapped, &copied] {
        let a = f.get_array("scores").unwrap();
        assert!(a.is_packed_f32());
        assert_eq!(a.len(), scores.len());
        let got: Vec<u32> = (0..a.len()).map(|i| a.f32(i).unwrap().to_bits()).collect();
        let want: Vec<u32> = scores.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want);
        assert_eq!(a.f32(scores.len()), None);
        assert_eq!(a.get(3).as_deref(), Some(&Value::F32(scores[3])));
        assert_eq!(f.get_array("few").unwrap().f32(0), Some(2.5));
    }
    // Equal however each side holds the values, and to what was written.
    assert_eq!(mapped.get("scores"), copied.get("scores"));
    let written = Value::array(
        ValueType::F32,
        scores.iter().map(|&x| Value::F32(x)).collect(),
    );
    assert_eq!(mapped.get("scores"), Some(&written));
    let mut other = scores.clone();
    other[9_999] = 0.0;
    let differs = Value::array(
        ValueType::F32,
        other.iter().map(|&x| Value::F32(x)).collect(),
    );
    assert_ne!(mapped.get("scores"), Some(&differs));
}

/// A merge list (read once at load) stays in the mapping: every string reads back (at each
/// position between the anchors), and a list holding invalid UTF-8 is copied, made valid.
#[test]
fn merge_lists_of_a_mapped_file_stay_in_place_and_read_back() {
    let merges: Vec<String> = (0..10_001)
        .map(|i| match i % 5 {
            0 => String::new(),
            1 => format!("Ġ{i} é"),
            2 => "x".repeat(i % 300),
            3 => "MARK".into(),
            _ => format!("{i} {}", i * 7),
        })
        .collect();
    let file = |merges: &[String]| {
        let mut w = GgufWriter::new();
        w.metadata("general.architecture", Value::String("odd".into()))
            .metadata(
                "tokenizer.ggml.merges",
                Value::array(
                    ValueType::String,
                    merges.iter().map(|m| Value::String(m.clone())).collect(),
                ),
            )
            .metadata("after", Value::U32(7));
        w.to_bytes()
    };
    let bytes = file(&merges);
    let path = std::env::temp_dir().join(format!("kolibri-merges-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let mapped = GgufFile::open(&path).unwrap();
    let copied = GgufFile::from_bytes(bytes.clone()).unwrap();
    assert!(mapped
        .get_array("tokenizer.ggml.merges")
        .unwrap()
        .is_in_file());
    assert!(!copied
        .get_array("tokenizer.ggml.merges")
        .unwrap()
        .is_in_file());
    for f in [&mapped, &copied] {
        let a = f.get_array("tokenizer.ggml.merges").unwrap();
        assert_eq!(a.len(), merges.len());
        for (i, m) in merges.iter().enumerate() {
            assert_eq!(a.str(i), Some(m.as_str()), "string {i}");
        }
        assert_eq!(a.str(merges.len()), None);
        assert_eq!(f.get("after"), Some(&Value::U32(7)));
    }
    assert_eq!(
        mapped.get("tokenizer.ggml.merges"),
        copied.get("tokenizer.ggml.merges")
    );

    // One string's bytes made invalid UTF-8: the list is copied, that string made valid.
    let mut bad = bytes;
    let at = bad.windows(4).position(|w| w == b"MARK").unwrap();
    bad[at] = 0xFF;
    std::fs::write(&path, &bad).unwrap();
    let mapped = GgufFile::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let a = mapped.get_array("tokenizer.ggml.merges").unwrap();
    assert!(!a.is_in_file());
    assert_eq!(a.str(3), Some("\u{FFFD}ARK"));
    assert_eq!(a.str(8), Some("MARK"));
    assert_eq!(a.str(10_000), Some(""));
}

#[test]
fn version_2_is_read() {
    let mut bytes = sample_file();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(GgufFile::from_bytes(bytes).unwrap().version(), 2);
}

fn err(bytes: Vec<u8>) -> GgufError {
    match GgufFile::from_bytes(bytes) {
        Ok(_) => panic!("malformed input accepted"),
        Err(e) => e,
    }
}

#[test]
fn named_errors_for_malformed_headers() {
    assert!(matches!(
        err(b"GGML\x03\0\0\0".to_vec()),
        GgufError::BadMagic(_)
    ));
    assert!(matches!(err(Vec::new()), GgufError::Truncated { .. }));
    let mut v1 = sample_file();
    v1[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(matches!(err(v1), GgufError::UnsupportedVersion(1)));
    let mut be = sample_file();
    be[4..8].copy_from_slice(&3u32.to_be_bytes());
    let e = err(be);
    assert!(e.to_string().contains("big-endian"), "{e}");
    // A metadata count no file could hold.
    let mut huge = sample_file();
    huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(err(huge), GgufError::CountTooLarge { .. }));
}

#[test]
fn named_errors_for_bad_tensors() {
    let mut w = GgufWriter::new();
    w.tensor("w", &[33], GgmlType::Q8_0, vec![0; 34]);
    let e = err(w.to_bytes());
    assert!(
        matches!(e, GgufError::BadTensorShape { .. }) && e.to_string().contains("\"w\""),
        "{e}"
    );

    // A tensor whose data runs past the end (truncated file).
    let mut w = GgufWriter::new();
    w.tensor_f32("t", &[64], &[0.5; 64]);
    let mut bytes = w.to_bytes();
    bytes.truncate(bytes.len() - 10);
    let e = err(bytes);
    assert!(
        matches!(e, GgufError::TensorOutOfBounds { .. }) && e.to_string().contains("\"t\""),
        "{e}"
    );

    // Unknown type id and misaligned offset, by patching the tensor table.
    let mut w = GgufWriter::new();
    w.tensor_f32("t", &[8], &[0.5; 8]);
    let bytes = w.to_bytes();
    let name_end = 24 + 8 + 1; // header + name length + "t"
    let type_at = name_end + 4 + 8;
    let mut unknown = bytes.clone();
    unknown[type_at..type_at + 4].copy_from_slice(&99u32.to_le_bytes());
    assert!(matches!(
        err(unknown),
        GgufError::UnknownTensorType { id: 99, .. }
    ));
    let mut misaligned = bytes.clone();
    misaligned[type_at + 4..type_at + 12].copy_from_slice(&3u64.to_le_bytes());
    assert!(matches!(
        err(misaligned),
        GgufError::MisalignedTensor { offset: 3, .. }
    ));
    let mut far = bytes;
    far[type_at + 4..type_at + 12].copy_from_slice(&(u64::MAX - 31).to_le_bytes());
    assert!(matches!(err(far), GgufError::TensorOutOfBounds { .. }));
}

#[test]
fn duplicate_keys_and_bad_alignment() {
    let mut w = GgufWriter::new();
    w.metadata("k", Value::U8(1)).metadata("k", Value::U8(2));
    assert!(matches!(err(w.to_bytes()), GgufError::DuplicateKey(_)));
    let mut w = GgufWriter::new();
    w.metadata("general.alignment", Value::U32(24));
    assert!(matches!(err(w.to_bytes()), GgufError::BadAlignment(_)));
}

/// Tiny deterministic PRNG (splitmix64) so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Property: every truncation and random byte corruption of a valid file either parses or
/// gives an error — never a panic — and whatever parses has in-bounds tensor data.
#[test]
fn truncations_and_byte_flips_never_panic() {
    let good = sample_file();
    for len in 0..good.len() {
        if let Ok(f) = GgufFile::from_bytes(good[..len].to_vec()) {
            for t in f.tensors() {
                let _ = f.tensor_data(t);
            }
        }
    }
    let mut rng = Rng(0x5eed);
    for _ in 0..20_000 {
        let mut bytes = good.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(bytes.len());
            bytes[i] = match rng.below(3) {
                0 => rng.next() as u8,
                1 => bytes[i] ^ (1 << rng.below(8)),
                _ => 0xff,
            };
        }
        if rng.below(4) == 0 {
            bytes.truncate(rng.below(bytes.len() + 1));
        }
        if let Ok(f) = GgufFile::from_bytes(bytes) {
            for t in f.tensors() {
                assert_eq!(f.tensor_data(t).len() as u64, t.size);
            }
        }
    }
    for _ in 0..2_000 {
        let mut bytes: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
        if rng.below(2) == 0 && bytes.len() >= 8 {
            bytes[..4].copy_from_slice(b"GGUF");
            bytes[4..8].copy_from_slice(&3u32.to_le_bytes());
        }
        let _ = GgufFile::from_bytes(bytes);
    }
}

/// Three parts of a split model, as llama-gguf-split writes them: the metadata in the first,
/// the split keys in each, `per_part` tensors in each.
fn split_parts(per_part: usize) -> Vec<Vec<u8>> {
    let count = 3;
    (0..count)
        .map(|no| {
            let mut w = GgufWriter::new();
            if no == 0 {
                w.metadata("general.architecture", Value::String("llama".into()));
            }
            w.metadata("split.no", Value::U16(no as u16));
            w.metadata("split.count", Value::U16(count as u16));
            w.metadata("split.tensors.count", Value::I32((count * per_part) as i32));
            for i in 0..per_part {
                let values: Vec<f32> = (0..16).map(|x| (no * 100 + i * 16 + x) as f32).collect();
                w.tensor_f32(&format!("t{no}.{i}"), &[16], &values);
            }
            w.to_bytes()
        })
        .collect()
}

#[test]
fn the_parts_of_a_split_model_read_as_one_file() {
    let f = GgufFile::from_part_bytes(&split_parts(2)).unwrap();
    assert_eq!(f.parts().len(), 3);
    assert_eq!(f.tensors().len(), 6);
    assert_eq!(f.get_str("general.architecture"), Some("llama"));
    for t in f.tensors() {
        let (no, i): (usize, usize) = {
            let (a, b) = t.name[1..].split_once('.').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        };
        assert_eq!(t.part, no);
        let first = f32::from_le_bytes(f.tensor_data(t)[..4].try_into().unwrap());
        assert_eq!(first, (no * 100 + i * 16) as f32, "{}", t.name);
    }
}

#[test]
fn part_sets_that_do_not_fit_are_named_errors() {
    let split_err = |parts: &[Vec<u8>]| match GgufFile::from_part_bytes(parts) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    let good = split_parts(2);
    let reordered = [good[0].clone(), good[2].clone(), good[1].clone()];
    assert!(split_err(&reordered).contains("part 2 of 3: it says it is part 3"));
    let twice = [good[0].clone(), good[1].clone(), good[1].clone()];
    assert!(split_err(&twice).contains("part 3 of 3: it says it is part 2"));
    let short = &good[..2];
    assert!(split_err(short).contains("one of 3 parts"));
    let other = split_parts(3);
    let foreign = [good[0].clone(), other[1].clone(), good[2].clone()];
    assert!(split_err(&foreign).contains("another split model"));
    let mut cut = good.clone();
    let len = cut[2].len();
    cut[2].truncate(len - 8);
    let e = split_err(&cut);
    assert!(
        e.contains("part 3 of 3") && e.contains("outside the data section"),
        "{e}"
    );
}

#[test]
fn truncations_and_byte_flips_of_parts_never_panic() {
    let good = split_parts(2);
    let mut rng = Rng(0x5b17);
    for _ in 0..5_000 {
        let mut parts = good.clone();
        let p = rng.below(parts.len());
        let bytes = &mut parts[p];
        let i = rng.below(bytes.len());
        bytes[i] ^= 1 << rng.below(8);
        if rng.below(4) == 0 {
            bytes.truncate(rng.below(bytes.len() + 1));
        }
        if let Ok(f) = GgufFile::from_part_bytes(&parts) {
            for t in f.tensors() {
                assert_eq!(f.tensor_data(t).len() as u64, t.size);
            }
        }
    }
}
