//! Damaged model files get an error that names the problem — never a panic.

mod common;

use std::path::PathBuf;

use kolibri::gguf::GgufError;
use kolibri::model::{Model, ModelError};

const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);
impl TempFile {
    fn new(tag: &str, bytes: &[u8]) -> TempFile {
        let p = std::env::temp_dir().join(format!("kolibri-{tag}-{}.gguf", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        TempFile(p)
    }
}
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn load_err(tag: &str, bytes: &[u8]) -> ModelError {
    let f = TempFile::new(tag, bytes);
    match Model::load(&f.0) {
        Ok(_) => panic!("{tag}: damaged model loaded"),
        Err(e) => e,
    }
}

/// Byte position of the data-offset field of tensor `name` in the tensor table.
fn offset_field(bytes: &[u8], name: &str) -> usize {
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(name.as_bytes());
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .expect("tensor name in header");
    let dims_at = at + needle.len();
    let n_dims = u32::from_le_bytes(bytes[dims_at..dims_at + 4].try_into().unwrap()) as usize;
    dims_at + 4 + 8 * n_dims + 4
}

#[test]
fn truncated_corrupt_and_random_files_are_named_errors() {
    let good = std::fs::read(common::model_path(MODEL)).unwrap();

    let e = load_err("truncated", &good[..good.len() * 3 / 5]);
    assert!(
        matches!(e, ModelError::Gguf(GgufError::TensorOutOfBounds { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("truncated"), "{e}");

    // Cut inside the vocabulary: the array count no longer fits, or a string runs past the end.
    let e = load_err("header-cut", &good[..1000]);
    assert!(
        matches!(
            e,
            ModelError::Gguf(GgufError::Truncated { .. } | GgufError::CountTooLarge { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("tokenizer.ggml.tokens"), "{e}");

    let field = offset_field(&good, "blk.3.ffn_up.weight");
    let original = u64::from_le_bytes(good[field..field + 8].try_into().unwrap());
    for (tag, bad) in [
        ("misaligned", original + 1),
        ("far-offset", original + (1 << 40)),
    ] {
        let mut bytes = good.clone();
        bytes[field..field + 8].copy_from_slice(&bad.to_le_bytes());
        let e = load_err(tag, &bytes);
        let msg = e.to_string();
        assert!(msg.contains("blk.3.ffn_up.weight"), "{tag}: {msg}");
        match tag {
            "misaligned" => assert!(
                matches!(e, ModelError::Gguf(GgufError::MisalignedTensor { .. })),
                "{msg}"
            ),
            _ => assert!(
                matches!(e, ModelError::Gguf(GgufError::TensorOutOfBounds { .. })),
                "{msg}"
            ),
        }
    }

    let mut state = 0x1234_5678_9abc_def0u64;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let e = load_err("random", &random);
    assert!(matches!(e, ModelError::Gguf(GgufError::BadMagic(_))), "{e}");
    let mut with_magic = random.clone();
    with_magic[..8].copy_from_slice(b"GGUF\x03\0\0\0");
    let e = load_err("random-magic", &with_magic);
    assert!(matches!(e, ModelError::Gguf(_)), "{e}");

    let e = Model::load("/nonexistent/model.gguf")
        .err()
        .expect("missing file");
    assert!(e.to_string().contains("/nonexistent/model.gguf"), "{e}");

    let dir = std::env::temp_dir();
    let e = Model::load(&dir).err().expect("a directory");
    assert!(
        e.to_string().contains("a directory, not a GGUF file"),
        "{e}"
    );
}

#[test]
fn unknown_architecture_and_missing_tensor_are_named() {
    let good = std::fs::read(common::model_path(MODEL)).unwrap();
    // Same-length rename of the architecture value keeps every offset valid.
    let mut bytes = good.clone();
    let at = bytes.windows(6).position(|w| w == b"gemma3").unwrap();
    let arch_key = bytes
        .windows(20)
        .position(|w| w == b"general.architecture")
        .unwrap();
    assert!(at > arch_key);
    bytes[at..at + 6].copy_from_slice(b"gemmaX");
    let e = load_err("unknown-arch", &bytes);
    assert!(
        matches!(&e, ModelError::UnknownArchitecture(a) if a == "gemmaX"),
        "{e}"
    );

    // Renaming a tensor (same length) makes a required one missing.
    let mut bytes = good;
    let name = b"blk.7.attn_k_norm.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
    bytes[at..at + name.len()].copy_from_slice(b"blk.7.attn_k_norm.weighX");
    let e = load_err("missing-tensor", &bytes);
    assert!(
        matches!(&e, ModelError::MissingTensor(t) if t == "blk.7.attn_k_norm.weight"),
        "{e}"
    );
}

/// Position of the u32 right after metadata key `key` (its value type) in `bytes`.
fn type_field(bytes: &[u8], key: &str) -> usize {
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(key.as_bytes());
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap_or_else(|| panic!("{key} in header"));
    at + needle.len()
}

#[test]
fn metadata_of_the_wrong_type_or_a_malformed_key_is_named() {
    let good = std::fs::read(common::model_path(MODEL)).unwrap();
    let set_u32 = |bytes: &mut Vec<u8>, at: usize, v: u32| {
        bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    };
    // (key, offset after the key's type field, new type id, the type the error names)
    let cases: &[(&str, usize, u32, &str)] = &[
        ("gemma3.context_length", 0, 6, "f32"), // u32 -> f32: same size
        ("gemma3.attention.head_count", 0, 5, ""), // u32 -> i32: still an integer, loads
        ("tokenizer.ggml.scores", 4, 5, "array of i32"), // element type f32 -> i32
        ("tokenizer.ggml.token_type", 4, 6, "array of f32"), // element type i32 -> f32
    ];
    for &(key, skip, new_type, found) in cases {
        let mut bytes = good.clone();
        let at = type_field(&bytes, key) + skip;
        set_u32(&mut bytes, at, new_type);
        let f = TempFile::new("wrong-type", &bytes);
        match (Model::load(&f.0), found) {
            (Ok(_), "") => {}
            (Ok(_), _) => panic!("{key}: a value of the wrong type loaded"),
            (Err(e), _) => {
                assert!(
                    matches!(&e, ModelError::Gguf(GgufError::WrongType { key: k, .. }) if k == key),
                    "{key}: {e}"
                );
                let text = e.to_string();
                assert!(text.contains(key) && text.contains(found), "{text}");
            }
        }
    }
    // A space inside a key.
    let mut bytes = good;
    let at = type_field(&bytes, "gemma3.block_count") - "block_count".len();
    bytes[at + 5] = b' ';
    let e = load_err("bad-key", &bytes);
    assert!(
        matches!(&e, ModelError::Gguf(GgufError::BadKey { .. })),
        "{e}"
    );
}
