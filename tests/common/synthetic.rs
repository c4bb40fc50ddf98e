//! The synthetic models of scripts/make-synthetic-models.py, and rewritten copies of them.

use kolibri::gguf::{GgufFile, GgufWriter, Value};

/// The cached synthetic model `name` (any generator version).
pub fn synthetic(name: &str) -> GgufFile {
    GgufFile::open(synthetic_path(name)).unwrap()
}

/// The path of the cached synthetic model `name`: its newest file (`NAME-vV.gguf`, or
/// `NAME-vVrR.gguf` for revision R of its recipe).
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn synthetic_path(name: &str) -> std::path::PathBuf {
    let dir = super::model_dir().join("synthetic");
    let prefix = format!("{name}-v");
    // (generator version, recipe revision) from a file name of this model.
    let version = |file: &str| -> Option<(u32, u32)> {
        let tag = file.strip_prefix(&prefix)?.strip_suffix(".gguf")?;
        let (v, r) = tag.split_once('r').unwrap_or((tag, "1"));
        Some((v.parse().ok()?, r.parse().ok()?))
    };
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter_map(|p| Some((version(p.file_name()?.to_str()?)?, p)))
                .max()
                .map(|(_, p)| p)
        })
        .unwrap_or_else(|| panic!("{name} is missing: run `scripts/make-synthetic-models.py`"))
}

/// The parts of the cached synthetic model `name` as gguf-py's split writer wrote them
/// (`scripts/make-synthetic-models.py --split-path NAME`), in order.
#[allow(dead_code)]
pub fn synthetic_split_parts(name: &str) -> Vec<std::path::PathBuf> {
    let single = synthetic_path(name);
    let dir = single
        .with_file_name("split")
        .join(single.file_stem().unwrap());
    let mut parts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: run `scripts/make-synthetic-models.py`",
                dir.display()
            )
        })
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    parts.sort();
    parts
}

/// `src` with key `key` set to `value` (removed when `None`) and each tensor passed through
/// `tensor` (dropped when it returns `None`; it may change the dims).
pub fn rewrite(
    src: &GgufFile,
    key: Option<(&str, Option<Value>)>,
    tensor: impl Fn(&str, Vec<u64>) -> Option<Vec<u64>>,
) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata() {
        match key {
            Some((name, _)) if name == k => {}
            _ => {
                w.metadata(k, v.clone());
            }
        }
    }
    if let Some((name, Some(v))) = key.clone() {
        w.metadata(name, v);
    }
    for t in src.tensors() {
        if let Some(dims) = tensor(&t.name, t.dims.clone()) {
            w.tensor(&t.name, &dims, t.ggml_type, src.tensor_data(t).to_vec());
        }
    }
    w.to_bytes()
}
