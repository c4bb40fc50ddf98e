//! Split GGUF models (`NAME-00001-of-00003.gguf`, as llama-gguf-split and the Hugging Face Hub
//! publish large models): written by `kolibri quantize --split-max-size/--split-max-tensors`,
//! or by gguf-py (llama.cpp's Python writer), loaded from any part through the Rust API, the C
//! API and the CLI with the single file's logits to the bit, mapped, read or paged; joined back
//! into the same tensors; and part sets that are not one model's refused with the part named.

mod common;

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr;
use std::sync::Arc;

use common::synthetic::{synthetic_path, synthetic_split_parts};
use kolibri::capi::context::*;
use kolibri::capi::guard::kolibri_last_error;
use kolibri::capi::model::*;
use kolibri::capi::status::*;
use kolibri::gguf::GgufFile;
use kolibri::model::{Context, ContextParams, LoadOptions, Logits, Model};
use kolibri::quantize::{quantize_file, Options, SplitOutput};

const LARGE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const SMALL: &str = "gemma-3-270m-q4_k_m.gguf";
const PROMPT: &str = "def quicksort(items):\n    \"\"\"Sort a list.\"\"\"\n    if len(items) <= 1:";

/// A fresh directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kolibri-split-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `input` copied (no conversion) into parts `dir/NAME-0000i-of-0000N.gguf`, as `split` cuts.
fn split(input: &Path, dir: &Path, name: &str, split: SplitOutput) -> Vec<PathBuf> {
    let opts = Options {
        file_type: None,
        allow_requantize: false,
        pure: false,
        split,
    };
    let out = dir.join(format!("{name}.gguf"));
    quantize_file(input, &out, &opts, |_, _| {}).unwrap().parts
}

fn by_tensors(n: usize) -> SplitOutput {
    SplitOutput {
        max_tensors: Some(n),
        ..Default::default()
    }
}

fn load(path: &Path, opts: &mut LoadOptions) -> Arc<Model> {
    Arc::new(Model::load_with(path, opts).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Every logit of a prompt pass, then of two single tokens.
fn logits(model: Arc<Model>) -> Vec<u32> {
    let ids = model.tokenizer.encode(PROMPT, true, false);
    let params = ContextParams {
        n_ctx: 128,
        n_threads: common::threads(),
        ..Default::default()
    };
    let mut ctx = Context::new(model, &params).unwrap();
    let mut out = ctx.eval(&ids, Logits::All).unwrap();
    for t in [17, 42] {
        out.extend(ctx.eval(&[t], Logits::Last).unwrap());
    }
    out.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn the_large_model_split_in_three_gives_the_single_files_logits_bits_everywhere() {
    let single = common::model_path(LARGE);
    let dir = scratch("large");
    let cut = SplitOutput {
        max_bytes: Some(400_000_000),
        ..Default::default()
    };
    let parts = split(&single, &dir, "coder", cut);
    let names: Vec<_> = parts.iter().map(|p| p.file_name().unwrap()).collect();
    assert_eq!(
        names,
        [
            "coder-00001-of-00003.gguf",
            "coder-00002-of-00003.gguf",
            "coder-00003-of-00003.gguf"
        ]
    );
    let reference = load(&single, &mut LoadOptions::default());
    let ids = reference.tokenizer.encode(PROMPT, true, false);
    let n_vocab = reference.hparams.n_vocab;
    let expected = logits(reference);
    // The Rust API, from the last part.
    let model = load(&parts[2], &mut LoadOptions::default());
    assert_eq!(model.gguf.parts().len(), 3);
    assert_eq!(
        model.gguf.size_on_disk(),
        parts
            .iter()
            .map(|p| p.metadata().unwrap().len())
            .sum::<u64>()
    );
    assert!(logits(model) == expected, "Rust API: other logits");
    // The C API, from the middle part: the positions it gives.
    let last_of_prompt = (ids.len() - 1) * n_vocab;
    let ids: Vec<i32> = ids.iter().map(|&t| t as i32).collect();
    assert!(
        capi_logits(&parts[1], &ids) == expected[last_of_prompt..],
        "C API: other logits"
    );
    // The CLI, from the first part: the same greedy text.
    let text = |m: &Path| {
        cli(&[
            "run",
            "-m",
            m.to_str().unwrap(),
            "-p",
            PROMPT,
            "-n",
            "12",
            "--raw",
        ])
    };
    assert_eq!(text(&parts[0]), text(&single));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn cli(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(args)
        .args(["--temp", "0", "-t", "2"])
        .env("KOLIBRI_REPACK_CACHE", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn ok(status: kolibri_status, what: &str) {
    if status != KOLIBRI_STATUS_OK {
        // SAFETY: the library's last-error text is a C string.
        let msg = unsafe { CStr::from_ptr(kolibri_last_error()) };
        panic!("{what}: {status:?}: {}", msg.to_string_lossy());
    }
}

/// The logits after `ids`, then after each of two single tokens, through the C API (which
/// gives the last position's).
fn capi_logits(path: &Path, ids: &[i32]) -> Vec<u32> {
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    let mut model = ptr::null_mut();
    let mut bits = Vec::new();
    // SAFETY: C strings, valid out pointers, token arrays of the lengths given; every handle
    // is freed below, and the logits are copied before the next call.
    unsafe {
        ok(
            kolibri_model_load(c_path.as_ptr(), ptr::null(), &mut model),
            "load",
        );
        let mut cp = std::mem::zeroed::<kolibri_context_params>();
        ok(
            kolibri_context_params_init(&mut cp, std::mem::size_of_val(&cp)),
            "params",
        );
        cp.n_ctx = 128;
        cp.n_threads = common::threads() as u32;
        let mut ctx = ptr::null_mut();
        ok(kolibri_context_new(model, &cp, &mut ctx), "context");
        for step in [ids, &[17], &[42]] {
            ok(kolibri_context_eval(ctx, step.as_ptr(), step.len()), "eval");
            let (mut p, mut n) = (ptr::null(), 0usize);
            ok(kolibri_context_logits(ctx, &mut p, &mut n), "logits");
            bits.extend(std::slice::from_raw_parts(p, n).iter().map(|x| x.to_bits()));
        }
        kolibri_context_free(ctx);
        kolibri_model_free(model);
    }
    bits
}

#[test]
fn a_tiny_model_in_parts_loads_from_any_part_mapped_read_or_paged() {
    let single = synthetic_path("qwen3-tiny");
    let dir = scratch("tiny");
    let n_tensors = GgufFile::open(&single).unwrap().tensors().len();
    let parts = split(&single, &dir, "tiny", by_tensors(n_tensors.div_ceil(3)));
    assert_eq!(parts.len(), 3);
    let expected = logits(load(&single, &mut LoadOptions::default()));
    let read = || LoadOptions {
        use_mmap: false,
        ..LoadOptions::default()
    };
    let paged = || LoadOptions {
        paged: true,
        ..LoadOptions::default()
    };
    for part in &parts {
        for (how, mut opts) in [
            ("mapped", LoadOptions::default()),
            ("read", read()),
            ("paged", paged()),
        ] {
            let got = logits(load(part, &mut opts));
            assert!(
                got == expected,
                "{how} from {}: other logits",
                part.display()
            );
        }
    }
    // The same model written in parts by gguf-py (llama.cpp's Python writer).
    let theirs = synthetic_split_parts("qwen3-tiny");
    assert!(theirs.len() > 1, "{theirs:?}");
    for part in &theirs {
        let got = logits(load(part, &mut LoadOptions::default()));
        assert!(
            got == expected,
            "gguf-py's {}: other logits",
            part.display()
        );
    }
    // Parts named otherwise, given in order (llama.h's llama_model_load_from_splits).
    let renamed: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("piece{i}.bin"))).collect();
    for (from, to) in parts.iter().zip(&renamed) {
        std::fs::rename(from, to).unwrap();
    }
    let model = Model::load_parts_with(&renamed, &mut LoadOptions::default()).unwrap();
    assert!(logits(Arc::new(model)) == expected);
    // Joined again (COPY without split limits): the same tensors, no split keys.
    for (from, to) in renamed.iter().zip(&parts) {
        std::fs::rename(from, to).unwrap();
    }
    let joined = split(&parts[1], &dir, "joined", SplitOutput::default());
    assert_eq!(joined, [dir.join("joined.gguf")]);
    let (a, b) = (
        GgufFile::open(&single).unwrap(),
        GgufFile::open(&joined[0]).unwrap(),
    );
    assert!(b.metadata().iter().all(|(k, _)| !k.starts_with("split.")));
    assert_eq!(a.metadata().len(), b.metadata().len());
    for (ta, tb) in a.tensors().iter().zip(b.tensors()) {
        assert_eq!(
            (&ta.name, &ta.dims, ta.ggml_type),
            (&tb.name, &tb.dims, tb.ggml_type)
        );
        assert!(a.tensor_data(ta) == b.tensor_data(tb), "{}", ta.name);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_repack_cache_keeps_a_split_models_repacked_weights_until_a_part_changes() {
    let single = common::model_path(SMALL);
    let dir = scratch("repack");
    let n = GgufFile::open(&single).unwrap().tensors().len();
    let parts = split(&single, &dir, "small", by_tensors(n.div_ceil(3)));
    assert_eq!(parts.len(), 3);
    let expected = logits(load(&single, &mut LoadOptions::default()));
    let cache_dir = dir.join("kpack");
    std::fs::create_dir_all(&cache_dir).unwrap();
    let cached = |path: &Path| {
        let mut opts = LoadOptions {
            repack_cache: Some(cache_dir.clone()),
            ..LoadOptions::default()
        };
        load(path, &mut opts)
    };
    assert!(!cached(&parts[0]).repacked_from_cache);
    let again = cached(&parts[2]);
    assert!(again.repacked_from_cache, "the second load reads the cache");
    assert!(
        logits(again) == expected,
        "from the repack cache: other logits"
    );
    // A part whose bytes change (its length and header as they were) is a miss.
    let mut bytes = std::fs::read(&parts[2]).unwrap();
    let end = bytes.len();
    bytes[end - 8..].iter_mut().for_each(|b| *b ^= 0x5a);
    std::fs::write(&parts[2], &bytes).unwrap();
    assert!(
        !cached(&parts[0]).repacked_from_cache,
        "a changed part is a miss"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The cache is keyed by the model's content: a copy elsewhere (another path, another
/// modification time) and a link share the first path's cache file.
#[test]
fn the_repack_cache_is_shared_by_every_path_to_one_model() {
    let single = common::model_path(SMALL);
    let dir = scratch("repack-paths");
    let cache_dir = dir.join("kpack");
    std::fs::create_dir_all(&cache_dir).unwrap();
    let copy = dir.join("copy.gguf");
    std::fs::copy(&single, &copy).unwrap();
    let link = dir.join("link.gguf");
    std::os::unix::fs::symlink(&copy, &link).unwrap();
    let cached = |path: &Path| {
        let mut opts = LoadOptions {
            repack_cache: Some(cache_dir.clone()),
            ..LoadOptions::default()
        };
        load(path, &mut opts).repacked_from_cache
    };
    assert!(!cached(&single), "the first load repacks");
    assert!(cached(&copy), "a copy reads the same cache file");
    assert!(cached(&link), "so does a link");
    let files = std::fs::read_dir(&cache_dir).unwrap().count();
    assert_eq!(files, 1, "one cache file for the one model");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The error of loading `path`.
fn load_error(path: &Path) -> String {
    match Model::load(path) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn part_sets_that_are_not_one_models_are_refused_naming_the_part() {
    let dir = scratch("hostile");
    let three = |model: &str, name: &str| {
        let path = synthetic_path(model);
        let n = GgufFile::open(&path).unwrap().tensors().len();
        split(&path, &dir, name, by_tensors(n.div_ceil(3)))
    };
    let fresh = |tag: &str| {
        let parts = three("qwen3-tiny", tag);
        assert_eq!(parts.len(), 3);
        parts
    };
    let expect = |parts: &[PathBuf], open: usize, wanted: &[&str]| {
        let err = load_error(&parts[open]);
        for w in wanted {
            assert!(err.contains(w), "{err:?} lacks {w:?}");
        }
    };

    let p = fresh("missing");
    std::fs::remove_file(&p[2]).unwrap();
    expect(&p, 0, &["part 3 of 3", "missing-00003-of-00003.gguf"]);
    // The C API says IO for a part it cannot read.
    let c_path = CString::new(p[0].to_str().unwrap()).unwrap();
    let mut model = ptr::null_mut();
    // SAFETY: a C string and an out pointer.
    let status = unsafe { kolibri_model_load(c_path.as_ptr(), ptr::null(), &mut model) };
    assert_eq!(status, KOLIBRI_STATUS_IO);
    assert!(model.is_null());

    let p = fresh("swapped");
    let tmp = dir.join("swap.tmp");
    std::fs::rename(&p[1], &tmp).unwrap();
    std::fs::rename(&p[2], &p[1]).unwrap();
    std::fs::rename(&tmp, &p[2]).unwrap();
    expect(&p, 2, &["part 2 of 3", "says it is part 3", "reordered"]);

    let p = fresh("copied");
    std::fs::copy(&p[1], &p[2]).unwrap();
    expect(&p, 0, &["part 3 of 3", "says it is part 2"]);

    // Part 2 from another model's split into as many parts.
    let p = fresh("foreign");
    let other = three("llama3-tiny", "other");
    assert_eq!(other.len(), 3);
    std::fs::copy(&other[1], &p[1]).unwrap();
    expect(&p, 0, &["part 2 of 3", "another"]);

    let p = fresh("renamed");
    let alone = dir.join("model.gguf");
    std::fs::rename(&p[0], &alone).unwrap();
    expect(&[alone], 0, &["-00001-of-00003.gguf", "name"]);

    let p = fresh("truncated");
    let bytes = std::fs::read(&p[1]).unwrap();
    std::fs::write(&p[1], &bytes[..bytes.len() - 100]).unwrap();
    expect(&p, 0, &["part 2 of 3", "truncated"]);

    // Given in the wrong order, named or not.
    let p = fresh("order");
    let given = [p[0].clone(), p[2].clone(), p[1].clone()];
    let err = Model::load_parts_with(&given, &mut LoadOptions::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("part 2 of 3") && err.contains("says it is part 3"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
