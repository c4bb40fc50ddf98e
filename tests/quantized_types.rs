//! `kolibri quantize` into every file type, end to end: a tiny Llama model written in F32 is
//! quantized by `quantize_file`, loaded, and run; its logits must match the naive f64 forward
//! pass over the quantized file's own dequantized weights. That checks each type's quantizer
//! writes blocks its dequantizer reads, and each type's matmul kernels (on this machine's
//! path) in a whole forward pass.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::llama_ref::{llama_gguf, max_abs_diff, reference_logits, spread, Dims};
use kolibri::gguf::GgufFile;
use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::quant::GgmlType;
use kolibri::quantize::{is_quantized, quantize_file, FileType, Options, QuantizeFileError};

/// Rows of 256, so every K-quant applies.
const DIMS: Dims = Dims {
    embd: 256,
    head: 4,
    head_kv: 2,
    ff: 512,
    layers: 2,
};

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("kolibri-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn f32_model(dir: &TempDir) -> PathBuf {
    let (bytes, _) = llama_gguf(&DIMS, |v| {
        (
            GgmlType::F32,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    });
    let p = dir.0.join("f32.gguf");
    std::fs::write(&p, bytes).unwrap();
    p
}

fn options(file_type: FileType, pure: bool) -> Options {
    Options {
        file_type: Some(file_type),
        allow_requantize: false,
        pure,
        split: Default::default(),
    }
}

/// The engine's last-token logits and the reference's on the model at `path`.
fn run(path: &PathBuf, tokens_of: &str) -> (Vec<f32>, Vec<f64>) {
    let gguf = GgufFile::open(path).unwrap();
    let want_tokens;
    let ours = {
        let model = Arc::new(Model::load(path).unwrap());
        want_tokens = model.tokenizer.encode(tokens_of, true, true);
        let params = ContextParams {
            n_ctx: 64,
            n_threads: 2,
            n_batch: 512,
            n_seq: 1,
            ..Default::default()
        };
        let mut ctx = Context::new(model, &params).unwrap();
        ctx.eval(&want_tokens, Logits::Last).unwrap()
    };
    (ours, reference_logits(&gguf, &DIMS, &want_tokens))
}

#[test]
fn every_file_type_quantizes_loads_and_matches_the_naive_forward_pass() {
    let dir = TempDir::new("types");
    let input = f32_model(&dir);
    let mut report = String::new();
    let mut ok = true;
    for name in FileType::names() {
        let ft = FileType::parse(name).unwrap();
        let out = dir.0.join(format!("{name}.gguf"));
        quantize_file(&input, &out, &options(ft, true), |_, _| {}).unwrap();
        // Pure: every weight matrix in the base type, norms as they were.
        let g = GgufFile::open(&out).unwrap();
        for t in g.tensors() {
            let want = if t.dims.len() >= 2 {
                ft.base()
            } else {
                GgmlType::F32
            };
            assert_eq!(t.ggml_type, want, "{name}: {}", t.name);
        }
        assert_eq!(g.get_u64("general.file_type"), Some(ft.id() as u64));
        let (ours, want) = run(&out, "hello world abc");
        let (diff, spread) = (max_abs_diff(&ours, &want), spread(&want));
        report += &format!("{name}: max |diff| {diff:.4} of spread {spread:.3}\n");
        // Activations are quantized to 8 bits (or f16) before each matmul.
        ok &= diff < 0.03 * spread;
    }
    eprint!("{report}");
    assert!(ok, "{report}");
}

#[test]
fn the_k_quant_mixes_vary_types_and_still_match() {
    let dir = TempDir::new("mix");
    let input = f32_model(&dir);
    let out = dir.0.join("q4_k_m.gguf");
    quantize_file(&input, &out, &options(FileType::Q4_K_M, false), |_, _| {}).unwrap();
    let g = GgufFile::open(&out).unwrap();
    let ty = |n: &str| g.tensor(n).unwrap().ggml_type;
    // Tied embeddings are the output matrix: Q6_K; of two layers, the last one's V and down
    // (the last eighth) get Q6_K too.
    assert_eq!(ty("token_embd.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.0.attn_v.weight"), GgmlType::Q4_K);
    assert_eq!(ty("blk.1.attn_v.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.1.ffn_down.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q4_K);
    let (ours, want) = run(&out, "abc hello");
    assert!(max_abs_diff(&ours, &want) < 0.05 * spread(&want));
}

#[test]
fn refusals_leave_nothing_behind() {
    let dir = TempDir::new("refuse");
    let input = f32_model(&dir);
    let q8 = dir.0.join("q8.gguf");
    quantize_file(&input, &q8, &options(FileType::Q8_0, false), |_, _| {}).unwrap();
    // Quantized weights are not quantized again unless asked.
    let out = dir.0.join("q4.gguf");
    let err = quantize_file(&q8, &out, &options(FileType::Q4_0, false), |_, _| {}).unwrap_err();
    assert!(matches!(err, QuantizeFileError::Requantize { .. }), "{err}");
    assert!(err.to_string().contains("--allow-requantize"), "{err}");
    let leftovers = std::fs::read_dir(&dir.0).unwrap().count();
    assert_eq!(leftovers, 2, "only the two inputs remain");
    let mut opts = options(FileType::Q4_0, false);
    opts.allow_requantize = true;
    quantize_file(&q8, &out, &opts, |_, _| {}).unwrap();
    let g = GgufFile::open(&out).unwrap();
    assert!(g.tensors().iter().any(|t| t.ggml_type == GgmlType::Q4_0));
    // The same file as input and output, a damaged input, a missing directory.
    let err = quantize_file(&q8, &q8, &opts, |_, _| {}).unwrap_err();
    assert!(matches!(err, QuantizeFileError::SameFile(_)), "{err}");
    let bad = dir.0.join("bad.gguf");
    let mut bytes = std::fs::read(&input).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&bad, bytes).unwrap();
    let err = quantize_file(&bad, &out, &opts, |_, _| {}).unwrap_err();
    assert!(matches!(err, QuantizeFileError::Open(_)), "{err}");
    let nowhere = dir.0.join("missing-dir").join("x.gguf");
    assert!(quantize_file(&input, &nowhere, &opts, |_, _| {}).is_err());
    assert!(!dir.0.join("missing-dir").exists());
    // NaN weights are refused by name.
    let (nan_bytes, _) = llama_gguf(&DIMS, |v| {
        let mut b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        b[..4].copy_from_slice(&f32::NAN.to_le_bytes());
        (GgmlType::F32, b)
    });
    let nan = dir.0.join("nan.gguf");
    std::fs::write(&nan, nan_bytes).unwrap();
    let err = quantize_file(&nan, &out, &opts, |_, _| {}).unwrap_err();
    assert!(matches!(err, QuantizeFileError::NonFinite { .. }), "{err}");
    assert!(
        GgufFile::open(&out).is_ok(),
        "the earlier output is untouched"
    );
    assert!(is_quantized(GgmlType::Q4_0) && !is_quantized(GgmlType::BF16));
}
