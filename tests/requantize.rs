//! `kolibri quantize` against llama-quantize on the real models: every file type of
//! `tests/data/llama-quantize.txt` (recorded by `scripts/record-quantize-reference.py` from
//! llama.cpp 0c1e57098) must give the same tensor types (the mix) and the same bytes, MXFP4
//! experts included (on a synthetic MoE).

mod common;

use kolibri::gguf::GgufFile;
use kolibri::quantize::{quantize_file, FileType, Options};
use sha2::{Digest, Sha256};

/// The two hashes the recording script prints: of each tensor's name and type, and of its
/// name, type and bytes, in name order.
fn hashes(path: &std::path::Path) -> (String, String) {
    let file = GgufFile::open(path).unwrap();
    let mut tensors: Vec<_> = file.tensors().iter().collect();
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    let (mut types, mut data) = (Sha256::new(), Sha256::new());
    for t in tensors {
        let id = t.ggml_type.id();
        types.update(format!("{} {id}\n", t.name).as_bytes());
        data.update(t.name.as_bytes());
        data.update([0u8]);
        data.update(id.to_le_bytes());
        data.update(file.tensor_data(t));
    }
    let hex = |h: Sha256| format!("{:x}", h.finalize());
    (hex(types), hex(data))
}

#[test]
fn quantized_files_match_llama_quantize() {
    let reference = std::fs::read_to_string(common::data_path("llama-quantize.txt")).unwrap();
    let dir = std::env::temp_dir().join(format!("kolibri-requant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    for line in reference.lines().filter(|l| !l.starts_with('#')) {
        let [model, ft, types, data] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("bad line {line:?}");
        };
        let opts = Options {
            file_type: Some(FileType::parse(ft).unwrap()),
            allow_requantize: true,
            pure: false,
            split: Default::default(),
        };
        let out = dir.join(format!("{ft}.gguf"));
        // A reference model, or synthetic/FILE (its generator version in the name).
        quantize_file(&common::model_path(model), &out, &opts, |_, _| {}).unwrap();
        let (t, d) = hashes(&out);
        assert_eq!(
            t, types,
            "{model} {ft}: the mix differs from llama-quantize's"
        );
        assert_eq!(
            d, data,
            "{model} {ft}: the blocks differ from llama-quantize's"
        );
        std::fs::remove_file(&out).unwrap();
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} cases");
    let _ = std::fs::remove_dir(&dir);
}
