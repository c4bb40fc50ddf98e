//! Saved state: a sequence saved after a prompt and loaded into a fresh context (in this
//! process, into another sequence slot, and in a fresh process) continues with logits
//! bit-identical to the context that never stopped. A truncated, corrupted, other-model,
//! other-layout or other-version state is refused with a clear error and leaves the context
//! as it was.

mod common;

use std::io::Cursor;
use std::sync::Arc;

use kolibri::model::{BatchToken, Context, ContextParams, KvType, Logits, Model, ModelError};

const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";
const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const PROMPT: &str = "Saved state lets a long prompt be evaluated once: the cache rows are \
                      written as stored, and loading them back continues where it stopped.";

fn context(model: &Arc<Model>, n_ctx: usize, n_seq: usize, k: KvType, v: KvType) -> Context {
    let params = ContextParams {
        n_ctx,
        n_seq,
        n_threads: common::threads(),
        type_k: k,
        type_v: v,
        ..Default::default()
    };
    Context::new(Arc::clone(model), &params).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A context that has evaluated the prompt, the logits it gave, and its saved state.
fn saved(model: &Arc<Model>, k: KvType, v: KvType) -> (Context, Vec<f32>, Vec<u8>) {
    let mut ctx = context(model, 128, 1, k, v);
    let prompt = model.tokenizer.encode(PROMPT, true, false);
    let logits = ctx.eval(&prompt, Logits::Last).unwrap();
    let mut state = Vec::new();
    let n = ctx.save_seq(0, &logits, &mut state).unwrap();
    assert_eq!(n as usize, state.len());
    (ctx, logits, state)
}

/// Saved after the prompt, loaded into a fresh context (sequence 0) and into sequence 1 of a
/// two-sequence one: the same tokens and logits come back, and the next two tokens' logits
/// are bit-identical to continuing the original.
fn round_trip(file: &str, k: KvType, v: KvType) {
    round_trip_path(&common::model_path(file), file, k, v)
}

fn round_trip_path(path: &std::path::Path, file: &str, k: KvType, v: KvType) {
    let model = Arc::new(Model::load(path).unwrap());
    let (mut original, logits, state) = saved(&model, k, v);
    let prompt = original.seq_tokens(0).to_vec();
    let next = [1000, 2000];
    let want: Vec<Vec<u32>> = next
        .iter()
        .map(|&t| bits(&original.eval(&[t], Logits::Last).unwrap()))
        .collect();

    let mut fresh = context(&model, 128, 1, k, v);
    let got = fresh.load_seq(0, &mut Cursor::new(&state)).unwrap();
    assert_eq!(bits(&got), bits(&logits), "{file}: saved logits");
    assert_eq!(fresh.seq_tokens(0), prompt);
    for (&t, want) in next.iter().zip(&want) {
        assert_eq!(
            &bits(&fresh.eval(&[t], Logits::Last).unwrap()),
            want,
            "{file} {k}/{v}"
        );
    }

    let mut two = context(&model, 128, 2, k, v);
    two.eval(&[5, 6, 7], Logits::Last).unwrap();
    two.load_seq(1, &mut Cursor::new(&state)).unwrap();
    assert_eq!(two.seq_tokens(0), &[5, 6, 7], "sequence 0 untouched");
    for (&t, want) in next.iter().zip(&want) {
        let out = two
            .decode(&[BatchToken {
                token: t,
                seq: 1,
                logits: true,
            }])
            .unwrap();
        assert_eq!(&bits(&out), want, "{file} {k}/{v} in sequence 1");
    }
}

#[test]
fn state_round_trips_bit_identically() {
    round_trip(GEMMA, KvType::F16, KvType::F16);
    round_trip(QWEN, KvType::Q8_0, KvType::F16);
    round_trip(QWEN, KvType::Q4_0, KvType::Q8_0);
}

/// A cache whose layers differ in heads (Gemma 4's sliding layers: 2 KV heads of 32; global
/// ones: 1 of 64) saves and loads its layers each in its own shape, f16 and quantized.
#[test]
fn state_of_per_layer_head_shapes_round_trips() {
    let path = common::synthetic::synthetic_path("gemma4moe-tiny");
    round_trip_path(&path, "gemma4moe-tiny", KvType::F16, KvType::F16);
    round_trip_path(&path, "gemma4moe-tiny", KvType::Q8_0, KvType::Q4_0);
}

/// Without saved logits the state still loads; the caller evaluates on.
#[test]
fn logits_are_optional() {
    let model = Arc::new(Model::load(common::model_path(GEMMA)).unwrap());
    let mut ctx = context(&model, 64, 1, KvType::F16, KvType::F16);
    ctx.eval(&[2, 100, 200], Logits::Last).unwrap();
    let mut state = Vec::new();
    ctx.save_seq(0, &[], &mut state).unwrap();
    let mut fresh = context(&model, 64, 1, KvType::F16, KvType::F16);
    assert!(fresh
        .load_seq(0, &mut Cursor::new(&state))
        .unwrap()
        .is_empty());
    assert_eq!(fresh.seq_tokens(0), &[2, 100, 200]);
    let e = ctx.save_seq(0, &[1.0; 3], &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("3 logits"), "{e}");
}

/// Every bad state is refused with a message saying what is wrong, and the context keeps its
/// tokens and gives the same next logits as a context that never saw the bad state.
#[test]
fn bad_states_are_refused_and_change_nothing() {
    let model = Arc::new(Model::load(common::model_path(GEMMA)).unwrap());
    let (_, _, good) = saved(&model, KvType::F16, KvType::F16);
    let qwen = Arc::new(Model::load(common::model_path(QWEN)).unwrap());
    let (_, _, other_model) = saved(&qwen, KvType::F16, KvType::F16);
    let (_, _, other_layout) = saved(&model, KvType::Q8_0, KvType::F16);

    let mut cases: Vec<(String, Vec<u8>, &str)> = vec![
        ("empty".into(), vec![], "too short"),
        ("other model".into(), other_model, "saved from model"),
        ("other layout".into(), other_layout, "keys q8_0"),
        (
            "not a state".into(),
            b"GGUF and more bytes".to_vec(),
            "not a Kolibri",
        ),
    ];
    for cut in [6, 12, 30, 200, good.len() / 2, good.len() - 1] {
        cases.push((format!("cut at {cut}"), good[..cut].to_vec(), "truncated"));
    }
    let mut longer = good.clone();
    longer.push(0);
    cases.push(("a byte appended".into(), longer, "trailing"));
    for at in [good.len() / 2, good.len() - 3, 60] {
        let mut flipped = good.clone();
        flipped[at] ^= 0x10;
        cases.push((format!("byte {at} flipped"), flipped, "corrupted"));
    }
    // The token count (after magic, version, fingerprint, name and layout) grown: the
    // header's own checksum calls it corrupt, not a file cut short.
    let name_len = u32::from_le_bytes(good[20..24].try_into().unwrap()) as usize;
    let mut count = good.clone();
    count[24 + name_len + 40 + 1] ^= 0x01;
    cases.push(("token count changed".into(), count, "header's checksum"));
    let mut version = good.clone();
    version[8] = 200;
    cases.push(("version 200".into(), version, "format version 200"));

    // A state of more tokens than the context holds.
    let mut small = context(&model, 16, 1, KvType::F16, KvType::F16);
    let e = small
        .load_seq(0, &mut Cursor::new(&good))
        .expect_err("30-odd tokens into 16 positions");
    assert!(e.to_string().contains("at most 16"), "{e}");

    let held = [2u32, 300, 400, 500];
    let mut reference = context(&model, 128, 1, KvType::F16, KvType::F16);
    reference.eval(&held, Logits::Last).unwrap();
    let want = bits(&reference.eval(&[42], Logits::Last).unwrap());
    for (what, bytes, says) in cases {
        let mut ctx = context(&model, 128, 1, KvType::F16, KvType::F16);
        ctx.eval(&held, Logits::Last).unwrap();
        let e = ctx.load_seq(0, &mut Cursor::new(&bytes)).expect_err(&what);
        assert!(matches!(e, ModelError::BadState(_)), "{what}: {e:?}");
        assert!(e.to_string().contains(says), "{what}: {e}");
        assert_eq!(ctx.seq_tokens(0), &held, "{what}");
        assert_eq!(
            bits(&ctx.eval(&[42], Logits::Last).unwrap()),
            want,
            "{what}"
        );
    }
}

/// A state file is written whole (through a renamed temporary) and read back by path; a
/// sequence out of range is an argument error.
#[test]
fn files_and_arguments() {
    let model = Arc::new(Model::load(common::model_path(GEMMA)).unwrap());
    let (ctx, logits, state) = saved(&model, KvType::F16, KvType::F16);
    let dir = tempdir();
    let path = dir.join("prompt.state");
    assert_eq!(
        ctx.save_seq_file(0, &logits, &path).unwrap() as usize,
        state.len()
    );
    assert_eq!(std::fs::read(&path).unwrap(), state);
    assert!(!dir.join("prompt.state.partial").exists());
    let mut fresh = context(&model, 128, 1, KvType::F16, KvType::F16);
    assert_eq!(bits(&fresh.load_seq_file(0, &path).unwrap()), bits(&logits));
    let e = fresh.load_seq_file(0, &dir.join("missing")).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    let e = ctx
        .save_seq_file(0, &logits, &dir.join("no/such/dir/x"))
        .unwrap_err();
    assert!(matches!(e, ModelError::Io(_)), "{e:?}");
    assert!(matches!(
        fresh.load_seq(3, &mut Cursor::new(&state)),
        Err(ModelError::InvalidArgument(_))
    ));
    assert!(matches!(
        ctx.save_seq(1, &[], &mut Vec::new()),
        Err(ModelError::InvalidArgument(_))
    ));
}

/// A fresh process loads the file and continues bit-identically: this test runs itself again
/// as a child (`child_continues_saved_state`), which writes the next token's logits.
#[test]
fn a_fresh_process_continues_bit_identically() {
    let model = Arc::new(Model::load(common::model_path(QWEN)).unwrap());
    let mut ctx = context(&model, 128, 1, KvType::Q8_0, KvType::Q8_0);
    let prompt = model.tokenizer.encode(PROMPT, true, false);
    let logits = ctx.eval(&prompt, Logits::Last).unwrap();
    let dir = tempdir();
    let (state, out) = (dir.join("s.state"), dir.join("next.logits"));
    ctx.save_seq_file(0, &logits, &state).unwrap();
    let want = bits(&ctx.eval(&[1234], Logits::Last).unwrap());
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_continues_saved_state", "--ignored"])
        .env(
            "KOLIBRI_STATE_CHILD",
            format!("{}\n{}", state.display(), out.display()),
        )
        .status()
        .unwrap();
    assert!(status.success());
    let got: Vec<u32> = std::fs::read(&out)
        .unwrap()
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, want);
}

#[test]
#[ignore = "run by a_fresh_process_continues_bit_identically"]
fn child_continues_saved_state() {
    let paths = std::env::var("KOLIBRI_STATE_CHILD").expect("run by the parent test");
    let (state, out) = paths.split_once('\n').unwrap();
    let model = Arc::new(Model::load(common::model_path(QWEN)).unwrap());
    let mut ctx = context(&model, 128, 1, KvType::Q8_0, KvType::Q8_0);
    ctx.load_seq_file(0, state.as_ref()).unwrap();
    let logits = ctx.eval(&[1234], Logits::Last).unwrap();
    let bytes: Vec<u8> = logits
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes())
        .collect();
    std::fs::write(out, bytes).unwrap();
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kolibri-state-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
