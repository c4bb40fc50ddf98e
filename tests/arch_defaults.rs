//! What an architecture assumes when its metadata is silent, and the choices a context makes
//! from the model (LongRoPE's factors), checked on rewritten synthetic models.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::synthetic::{rewrite, synthetic};
use kolibri::gguf::GgufFile;
use kolibri::model::{Context, ContextParams, Logits, Model};

/// A temporary file of its own holding `bytes`, opened by `open` and removed (the tests run
/// in parallel; a mapping keeps its removed file).
fn via_file<T>(bytes: &[u8], open: impl Fn(&Path) -> T) -> T {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("kolibri-defaults-{}-{n}.gguf", std::process::id());
    let p = std::env::temp_dir().join(name);
    std::fs::write(&p, bytes).unwrap();
    let t = open(&p);
    std::fs::remove_file(&p).unwrap();
    t
}

/// `bytes` loaded as a model.
fn load(bytes: &[u8]) -> Model {
    via_file(bytes, |p| Model::load(p).unwrap())
}

/// `src` without the keys `drop`.
fn without(src: &GgufFile, drop: &[&str]) -> Vec<u8> {
    let mut bytes = rewrite(src, None, |_, d| Some(d));
    for key in drop {
        let file = via_file(&bytes, |p| GgufFile::open(p).unwrap());
        bytes = rewrite(&file, Some((key, None)), |_, d| Some(d));
    }
    bytes
}

#[test]
fn gemma2_defaults_are_llama_cpps() {
    let src = synthetic("gemma2-tiny");
    let written = load(&rewrite(&src, None, |_, d| Some(d))).hparams;
    assert_eq!(
        (written.attn_softcap, written.final_logit_softcap),
        (4.0, 15.0)
    );
    assert_eq!(written.sliding_window, 8);
    let silent = without(
        &src,
        &[
            "gemma2.attn_logit_softcapping",
            "gemma2.final_logit_softcapping",
            "gemma2.attention.sliding_window",
        ],
    );
    let hp = load(&silent).hparams;
    assert_eq!((hp.attn_softcap, hp.final_logit_softcap), (50.0, 30.0));
    assert_eq!(hp.sliding_window, 4096);
    assert_eq!(hp.swa_layers, [true, false, true, false]);
    assert_eq!(hp.rope_base_swa, hp.rope_base);
}

#[test]
fn llama_slides_only_where_the_metadata_says() {
    let src = synthetic("mistral-tiny");
    let hp = load(&rewrite(&src, None, |_, d| Some(d))).hparams;
    assert_eq!(
        (hp.sliding_window, hp.swa_layers.as_slice()),
        (8, &[true; 3][..])
    );
    let plain = without(&src, &["llama.attention.sliding_window"]);
    let hp = load(&plain).hparams;
    assert_eq!(
        (hp.sliding_window, hp.swa_layers.as_slice()),
        (0, &[false; 3][..])
    );
    // Phi-3 has a window in its metadata, and (as in llama.cpp) no layer uses it.
    let hp = load(&rewrite(&synthetic("phi3-tiny"), None, |_, d| Some(d))).hparams;
    assert_eq!(hp.swa_layers, [false; 3]);
}

/// LongRoPE: a context no longer than the original 32 positions takes the short factors, a
/// longer one the long factors (llama.cpp's rule), whatever its length beyond that.
#[test]
fn long_rope_factors_follow_the_context_length() {
    let src = synthetic("phi3-tiny");
    let model = Arc::new(load(&rewrite(&src, None, |_, d| Some(d))));
    assert_eq!(model.hparams.n_ctx_orig, 32);
    let prompt: Vec<u32> = (0..20).map(|i| 100 + 37 * i).collect();
    let logits = |n_ctx| {
        let params = ContextParams {
            n_ctx,
            n_threads: common::threads(),
            ..Default::default()
        };
        let mut ctx = Context::new(Arc::clone(&model), &params).unwrap();
        ctx.eval(&prompt, Logits::Last).unwrap()
    };
    let (short, long33, long512) = (logits(32), logits(33), logits(512));
    assert_eq!(long33, long512, "both longer than 32: the long factors");
    let diff = short
        .iter()
        .zip(&long33)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(diff > 0.1, "short and long factors give the same logits");
}
