//! The bits of the logits, hashed, against values committed in `tests/data/logits-hashes.txt`:
//! a change in any kernel, driver or plan that moves a single bit on a reference model fails
//! here, on whichever kernel configuration the process runs (`KOLIBRI_CPU`, `KOLIBRI_REPACK`;
//! `scripts/test.sh` runs this suite once per forced configuration).
//!
//! Each model sees a 20-token prompt pass (tiles; AMX where the CPU has it), a 5-token batch
//! (the small-batch kernels) and 3 single tokens (matrix-vector). AMX is bit-identical to the
//! AVX-512 vector kernels by design, so it shares their entry: running this on an AMX machine
//! checks that claim at model level.
//!
//! To record a new configuration, run the suite and add the line its failure prints. To change
//! the committed bits on purpose, say why in the commit.

mod common;

use std::sync::Arc;

use kolibri::kernels;
use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::quant::GgmlType;

const PROMPT: &str = "The quick brown fox jumps over the lazy dog, and then it runs far into the \
                      woods, where the old oak trees stand tall and the river winds past the mill.";

/// FNV-1a over the f32 bit patterns.
fn hash(h: &mut u64, xs: &[f32]) {
    for x in xs {
        for b in x.to_bits().to_le_bytes() {
            *h = (*h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The kernel configuration this process runs, as the hash file names it. AMX shares the
/// AVX-512 entry (its results are the vector kernels' bit for bit).
fn config() -> String {
    let repack = if kernels::repacks(GgmlType::Q4_K) {
        "repack"
    } else {
        "inplace"
    };
    let path = match kernels::backend().path() {
        kernels::CpuPath::Amx => kernels::CpuPath::Avx512,
        p => p,
    };
    format!("{} {path} {repack}", std::env::consts::ARCH)
}

fn logits_hash(file: &str, threads: usize) -> u64 {
    let model = Arc::new(Model::load(common::model_path(file)).unwrap());
    let mut ids = model.tokenizer.encode(PROMPT, true, false);
    assert!(ids.len() >= 28, "{file}: prompt too short ({})", ids.len());
    ids.truncate(28);
    let params = ContextParams {
        n_ctx: 64,
        n_threads: threads,
        ..Default::default()
    };
    let mut ctx = Context::new(model, &params).unwrap();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    hash(&mut h, &ctx.eval(&ids[..20], Logits::All).unwrap());
    hash(&mut h, &ctx.eval(&ids[20..25], Logits::All).unwrap());
    for &t in &ids[25..28] {
        hash(&mut h, &ctx.eval(&[t], Logits::Last).unwrap());
    }
    h
}

fn expected(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(common::data_path("logits-hashes.txt")).unwrap();
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (k, v) = l.rsplit_once(' ')?;
        (k == key).then(|| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap())
    })
}

fn check(file: &str) {
    let got = logits_hash(file, common::threads());
    let key = format!("{} {file}", config());
    eprintln!("{key} {got:#018x}");
    // The split over threads changes no sum: one thread gives the same bits (not rechecked on
    // the slow scalar path).
    if common::threads() > 1 && kernels::backend().path() != kernels::CpuPath::Scalar {
        assert_eq!(logits_hash(file, 1), got, "{key}: one thread differs");
    }
    match expected(&key) {
        Some(want) => assert_eq!(
            got, want,
            "{key}: logits hash {got:#018x}, committed {want:#018x}"
        ),
        None => panic!("no committed hash for this configuration; add: {key} {got:#018x}"),
    }
}

#[test]
fn gemma3_270m_logits_bits() {
    check("gemma-3-270m-q4_k_m.gguf");
}

#[test]
fn qwen25_coder_05b_logits_bits() {
    check("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
}

#[test]
fn qwen25_coder_15b_logits_bits() {
    check("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
}
