//! Context shift: after forgetting a run of old positions, every moved key sits at its new
//! position. Layer 0's keys depend only on their token and position (its input is the token's
//! embedding), so after the shift they must be the keys a fresh context computes for the kept
//! tokens: on Gemma 3 (sliding layers with their own RoPE base) and Qwen2.5, with f16 and
//! quantized caches. Generation continues after it, and bad shifts are refused.

mod common;

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, KvType, Logits, Model, ModelError};

const TEXT: &str = "The quick brown fox jumps over the lazy dog, and then it runs far into the \
                    woods, where the old oak trees stand tall and the river winds past the mill. \
                    The miller's daughter counts the sacks of flour each morning before dawn, \
                    while the wheel turns slowly and the water sings over the stones.";

fn context(model: &Arc<Model>, ty: KvType) -> Context {
    let params = ContextParams {
        n_ctx: 128,
        n_threads: common::threads(),
        type_k: ty,
        type_v: ty,
        ..Default::default()
    };
    Context::new(Arc::clone(model), &params).unwrap()
}

/// The RMS of the difference of two key rows over the RMS of the second.
fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    let rms = |v: &mut dyn Iterator<Item = f32>| (v.map(|x| x * x).sum::<f32>()).sqrt();
    rms(&mut a.iter().zip(b).map(|(x, y)| x - y)) / rms(&mut b.iter().copied()).max(1e-6)
}

fn check(file: &str) {
    let model = Arc::new(Model::load(common::model_path(file)).unwrap());
    let tokens = model.tokenizer.encode(TEXT, true, false);
    let (n_keep, n_discard) = (4, 23);
    assert!(
        tokens.len() > n_keep + n_discard + 10,
        "{} tokens",
        tokens.len()
    );
    let kept: Vec<u32> = tokens[..n_keep]
        .iter()
        .chain(&tokens[n_keep + n_discard..])
        .copied()
        .collect();
    // f16 keys are rounded once more after the re-rotation; quantized ones requantized (about
    // 1.7x one quantization's error; measured worst: 0.0006, 0.010 and 0.17).
    for (ty, tol) in [
        (KvType::F16, 2e-3),
        (KvType::Q8_0, 0.03),
        (KvType::Q4_0, 0.25),
    ] {
        let mut shifted = context(&model, ty);
        shifted.eval(&tokens, Logits::Last).unwrap();
        let before_keep = shifted.key_row(0, 0, n_keep - 1);
        let first_moved = shifted.key_row(0, 0, n_keep + n_discard);
        shifted.shift_seq(0, n_keep, n_discard).unwrap();
        assert_eq!(shifted.n_past(), kept.len());
        assert_eq!(
            shifted.key_row(0, 0, n_keep - 1),
            before_keep,
            "{ty}: kept rows move"
        );
        let mut fresh = context(&model, ty);
        fresh.eval(&kept, Logits::Last).unwrap();
        for pos in 0..kept.len() {
            let d = rel_diff(&shifted.key_row(0, 0, pos), &fresh.key_row(0, 0, pos));
            assert!(d < tol, "{file} {ty}: layer 0 key at {pos} differs by {d}");
        }
        // Not a vacuous check: the same token's key at its old position is far from this
        // (beyond Q4_0's requantization noise only on Gemma, whose keys rotate faster).
        let d = rel_diff(&first_moved, &fresh.key_row(0, 0, n_keep));
        if ty != KvType::Q4_0 {
            assert!(
                d > 5.0 * tol,
                "{file} {ty}: old and new positions differ by {d}"
            );
        }
        let logits = shifted.eval(&tokens[5..9], Logits::Last).unwrap();
        assert!(logits.iter().all(|x| x.is_finite()));
        assert_eq!(shifted.n_past(), kept.len() + 4);
    }
}

#[test]
fn moved_keys_are_the_keys_of_their_new_positions() {
    check("gemma-3-270m-q4_k_m.gguf");
    check("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
}

#[test]
fn shifts_outside_the_sequence_are_refused() {
    let model = Arc::new(Model::load(common::model_path("gemma-3-270m-q4_k_m.gguf")).unwrap());
    let mut ctx = context(&model, KvType::F16);
    ctx.eval(&[2, 100, 200, 300], Logits::Last).unwrap();
    for (seq, keep, discard) in [(0, 2, 3), (0, 5, 0), (1, 0, 1), (0, usize::MAX, 2)] {
        let err = ctx.shift_seq(seq, keep, discard).unwrap_err();
        assert!(matches!(err, ModelError::InvalidArgument(_)), "{err}");
    }
    assert_eq!(ctx.n_past(), 4, "a refused shift changes nothing");
    ctx.shift_seq(0, 4, 0).unwrap();
    assert_eq!(ctx.n_past(), 4);
}

/// `kolibri run` past a 32-token context: with `--context-shift` it generates every token asked
/// for (shifting several times), without it it stops at the full context and says why.
#[test]
fn run_continues_past_a_full_context_only_when_asked() {
    let model = common::model_path("gemma-3-270m-q4_k_m.gguf");
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kolibri"))
            .args([
                "run",
                "-m",
                model.to_str().unwrap(),
                "-p",
                "Once upon a time",
            ])
            .args(["-n", "60", "-c", "32", "--temp", "0", "-t", "2", "--raw"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let shifted = run(&["--context-shift", "--keep", "2"]);
    assert!(shifted.contains("/ 60 tokens"), "{shifted}");
    assert!(shifted.contains("context shifts: "), "{shifted}");
    let plain = run(&[]);
    assert!(plain.contains("the context is full (32 tokens"), "{plain}");
    assert!(!plain.contains("/ 60 tokens"), "{plain}");
}
