//! A tiny Llama-architecture model written by the test itself (random Q8_0 weights, a small
//! SentencePiece vocabulary): the forward pass against a naive f64 reference written here from
//! the architecture's definition, batch/one-by-one equivalence, rewinding, and API misuse.
//! Needs no downloaded model, so it also runs under qemu on aarch64.

use std::sync::Arc;

use kolibri::gguf::{GgufFile, GgufWriter, Value, ValueType};
use kolibri::model::{BatchToken, Context, ContextParams, Logits, Model, ModelError};
use kolibri::quant::{
    activation::quantize_row_q8_0, block_bytes, dequantize_row, BlockQ8_0, GgmlType,
};

const N_EMBD: usize = 64;
const N_HEAD: usize = 4;
const N_HEAD_KV: usize = 2;
const HEAD_DIM: usize = N_EMBD / N_HEAD;
const N_FF: usize = 128;
const N_LAYER: usize = 2;
const ROPE_BASE: f32 = 10_000.0;
const EPS: f32 = 1e-5;

struct Rng(u64);
impl Rng {
    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform() * scale).collect()
    }
}

fn vocab() -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    for piece in [
        "▁", "a", "b", "c", "▁a", "▁b", "ab", "▁ab", "bc", "▁abc", "hello", "▁hello", "▁world",
    ] {
        tokens.push(piece.into());
        types.push(1);
    }
    let scores = (0..tokens.len())
        .map(|i| {
            if types[i] == 1 {
                -(i as f32) / 10.0
            } else {
                0.0
            }
        })
        .collect();
    (tokens, scores, types)
}

fn q8_0_bytes(values: &[f32]) -> Vec<u8> {
    let mut blocks = vec![
        BlockQ8_0 {
            d: half::f16::ZERO,
            qs: [0; 32]
        };
        values.len() / 32
    ];
    quantize_row_q8_0(values, &mut blocks);
    block_bytes(&blocks).to_vec()
}

/// Builds the GGUF image. Returns it with the vocabulary size.
fn tiny_model_bytes() -> (Vec<u8>, usize) {
    let (tokens, scores, types) = vocab();
    let n_vocab = tokens.len();
    let mut w = GgufWriter::new();
    let s = |v: &str| Value::String(v.into());
    w.metadata("general.architecture", s("llama"))
        .metadata("llama.context_length", Value::U32(128))
        .metadata("llama.embedding_length", Value::U32(N_EMBD as u32))
        .metadata("llama.block_count", Value::U32(N_LAYER as u32))
        .metadata("llama.feed_forward_length", Value::U32(N_FF as u32))
        .metadata("llama.attention.head_count", Value::U32(N_HEAD as u32))
        .metadata(
            "llama.attention.head_count_kv",
            Value::U32(N_HEAD_KV as u32),
        )
        .metadata("llama.rope.freq_base", Value::F32(ROPE_BASE))
        .metadata("llama.attention.layer_norm_rms_epsilon", Value::F32(EPS))
        .metadata("tokenizer.ggml.model", s("llama"))
        .metadata(
            "tokenizer.ggml.tokens",
            Value::array(
                ValueType::String,
                tokens.into_iter().map(Value::String).collect(),
            ),
        )
        .metadata(
            "tokenizer.ggml.scores",
            Value::array(ValueType::F32, scores.into_iter().map(Value::F32).collect()),
        )
        .metadata(
            "tokenizer.ggml.token_type",
            Value::array(ValueType::I32, types.into_iter().map(Value::I32).collect()),
        )
        .metadata("tokenizer.ggml.bos_token_id", Value::U32(1))
        .metadata("tokenizer.ggml.eos_token_id", Value::U32(2))
        .metadata("tokenizer.ggml.unknown_token_id", Value::U32(0));
    let mut rng = Rng(0x00c0_ffee_1234_5678);
    let mut matrix = |w: &mut GgufWriter, name: &str, k: usize, rows: usize| {
        let values = rng.vec(k * rows, 0.5 / (k as f32).sqrt() * 3.0);
        w.tensor(
            name,
            &[k as u64, rows as u64],
            GgmlType::Q8_0,
            q8_0_bytes(&values),
        );
    };
    matrix(&mut w, "token_embd.weight", N_EMBD, n_vocab);
    for il in 0..N_LAYER {
        let n = |t: &str| format!("blk.{il}.{t}");
        matrix(&mut w, &n("attn_q.weight"), N_EMBD, N_HEAD * HEAD_DIM);
        matrix(&mut w, &n("attn_k.weight"), N_EMBD, N_HEAD_KV * HEAD_DIM);
        matrix(&mut w, &n("attn_v.weight"), N_EMBD, N_HEAD_KV * HEAD_DIM);
        matrix(&mut w, &n("attn_output.weight"), N_HEAD * HEAD_DIM, N_EMBD);
        matrix(&mut w, &n("ffn_gate.weight"), N_EMBD, N_FF);
        matrix(&mut w, &n("ffn_up.weight"), N_EMBD, N_FF);
        matrix(&mut w, &n("ffn_down.weight"), N_FF, N_EMBD);
    }
    let mut rng2 = Rng(99);
    for il in 0..N_LAYER {
        for t in ["attn_norm.weight", "ffn_norm.weight"] {
            let v: Vec<f32> = rng2.vec(N_EMBD, 0.3).iter().map(|x| 1.0 + x).collect();
            w.tensor_f32(&format!("blk.{il}.{t}"), &[N_EMBD as u64], &v);
        }
    }
    let v: Vec<f32> = rng2.vec(N_EMBD, 0.3).iter().map(|x| 1.0 + x).collect();
    w.tensor_f32("output_norm.weight", &[N_EMBD as u64], &v);
    (w.to_bytes(), n_vocab)
}

fn load() -> Arc<Model> {
    let (bytes, _) = tiny_model_bytes();
    Arc::new(Model::from_gguf(GgufFile::from_bytes(bytes).unwrap()).unwrap())
}

fn params(n_ctx: usize) -> ContextParams {
    ContextParams {
        n_ctx,
        n_threads: 2,
        n_batch: 512,
        n_seq: 1,
    }
}

/// Naive reference forward pass in f64 from dequantized weights (Llama: RMSNorm, interleaved
/// RoPE, GQA, SwiGLU, tied output). Returns the last token's logits.
fn reference_logits(tokens: &[u32]) -> Vec<f64> {
    let (bytes, n_vocab) = tiny_model_bytes();
    let g = GgufFile::from_bytes(bytes).unwrap();
    let get = |name: &str| -> Vec<f64> {
        let t = g.tensor(name).unwrap();
        let mut out = vec![0f32; t.n_elements() as usize];
        dequantize_row(t.ggml_type, g.tensor_data(t), &mut out).unwrap();
        out.into_iter().map(f64::from).collect()
    };
    let matvec = |w: &[f64], x: &[f64]| -> Vec<f64> {
        w.chunks(x.len())
            .map(|r| r.iter().zip(x).map(|(a, b)| a * b).sum())
            .collect()
    };
    let rms = |x: &[f64], w: &[f64]| -> Vec<f64> {
        let s = (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + EPS as f64).sqrt();
        x.iter().zip(w).map(|(v, g)| v / s * g).collect()
    };
    let rope = |x: &mut [f64], pos: usize| {
        for head in x.chunks_mut(HEAD_DIM) {
            for i in 0..HEAD_DIM / 2 {
                let theta = pos as f64 * (ROPE_BASE as f64).powf(-2.0 * i as f64 / HEAD_DIM as f64);
                let (a, b) = (head[2 * i], head[2 * i + 1]);
                head[2 * i] = a * theta.cos() - b * theta.sin();
                head[2 * i + 1] = a * theta.sin() + b * theta.cos();
            }
        }
    };
    let embd = get("token_embd.weight");
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| embd[t as usize * N_EMBD..][..N_EMBD].to_vec())
        .collect();
    for il in 0..N_LAYER {
        let w = |t: &str| get(&format!("blk.{il}.{t}"));
        let (wq, wk, wv, wo) = (
            w("attn_q.weight"),
            w("attn_k.weight"),
            w("attn_v.weight"),
            w("attn_output.weight"),
        );
        let (an, fnw) = (w("attn_norm.weight"), w("ffn_norm.weight"));
        let (wg, wu, wd) = (
            w("ffn_gate.weight"),
            w("ffn_up.weight"),
            w("ffn_down.weight"),
        );
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        let mut qs = Vec::new();
        for (pos, x) in xs.iter().enumerate() {
            let h = rms(x, &an);
            let (mut q, mut k) = (matvec(&wq, &h), matvec(&wk, &h));
            rope(&mut q, pos);
            rope(&mut k, pos);
            qs.push(q);
            ks.push(k);
            vs.push(matvec(&wv, &h));
        }
        for (pos, x) in xs.iter_mut().enumerate() {
            let mut attn = vec![0f64; N_HEAD * HEAD_DIM];
            for h in 0..N_HEAD {
                let kvh = h / (N_HEAD / N_HEAD_KV);
                let q = &qs[pos][h * HEAD_DIM..][..HEAD_DIM];
                let scores: Vec<f64> = (0..=pos)
                    .map(|p| {
                        q.iter()
                            .zip(&ks[p][kvh * HEAD_DIM..][..HEAD_DIM])
                            .map(|(a, b)| a * b)
                            .sum::<f64>()
                            / (HEAD_DIM as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = scores.iter().map(|s| (s - m).exp()).sum();
                for p in 0..=pos {
                    let a = (scores[p] - m).exp() / z;
                    for d in 0..HEAD_DIM {
                        attn[h * HEAD_DIM + d] += a * vs[p][kvh * HEAD_DIM + d];
                    }
                }
            }
            for (xi, o) in x.iter_mut().zip(matvec(&wo, &attn)) {
                *xi += o;
            }
            let h = rms(x, &fnw);
            let (g, u) = (matvec(&wg, &h), matvec(&wu, &h));
            let act: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            for (xi, o) in x.iter_mut().zip(matvec(&wd, &act)) {
                *xi += o;
            }
        }
    }
    let h = rms(xs.last().unwrap(), &get("output_norm.weight"));
    let logits = matvec(&embd, &h);
    assert_eq!(logits.len(), n_vocab);
    logits
}

fn max_abs_diff(a: &[f32], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn forward_matches_naive_reference() {
    let model = load();
    let tokens = model.tokenizer.encode("hello world abc", true, true);
    assert!(tokens.len() >= 4, "{tokens:?}");
    let mut ctx = Context::new(Arc::clone(&model), &params(64)).unwrap();
    let ours = ctx.eval(&tokens, Logits::Last).unwrap();
    let want = reference_logits(&tokens);
    let spread = want.iter().cloned().fold(f64::MIN, f64::max)
        - want.iter().cloned().fold(f64::MAX, f64::min);
    let diff = max_abs_diff(&ours, &want);
    // Activations are quantized to 8 bits before each matmul: a few percent of the spread.
    assert!(
        diff < 0.05 * spread,
        "max |logit diff| {diff} vs spread {spread}"
    );
    // The check has teeth: the wrong RoPE pairing or no RoPE at all is far outside it.
    let shifted = reference_logits(&[tokens[0], tokens[2], tokens[1], tokens[3]]);
    assert!(max_abs_diff(&ours, &shifted) > 0.05 * spread);
}

#[test]
fn batch_and_one_by_one_agree_and_rewind_replays() {
    let model = load();
    let tokens = model.tokenizer.encode("abc hello ab world", true, false);
    let mut batch = Context::new(Arc::clone(&model), &params(64)).unwrap();
    let all = batch.eval(&tokens, Logits::All).unwrap();
    let n_vocab = model.hparams.n_vocab;
    assert_eq!(all.len(), tokens.len() * n_vocab);
    let mut single = Context::new(Arc::clone(&model), &params(64)).unwrap();
    for (i, &t) in tokens.iter().enumerate() {
        let l = single.eval(&[t], Logits::Last).unwrap();
        let row: Vec<f64> = all[i * n_vocab..(i + 1) * n_vocab]
            .iter()
            .map(|&v| v as f64)
            .collect();
        assert!(max_abs_diff(&l, &row) < 1e-2, "position {i}");
    }
    assert_eq!(single.n_past(), tokens.len());
    // Rewind to 2 tokens and replay the rest: same logits as before.
    single.truncate(2);
    let again = single.eval(&tokens[2..], Logits::Last).unwrap();
    let last: Vec<f64> = all[(tokens.len() - 1) * n_vocab..]
        .iter()
        .map(|&v| v as f64)
        .collect();
    assert!(max_abs_diff(&again, &last) < 1e-2);
    // Same input, same output, bit for bit.
    let mut again_ctx = Context::new(Arc::clone(&model), &params(64)).unwrap();
    assert_eq!(again_ctx.eval(&tokens, Logits::All).unwrap(), all);
}

#[test]
fn misuse_gets_errors_and_leaves_the_context_usable() {
    let model = load();
    let n_vocab = model.hparams.n_vocab;
    let mut ctx = Context::new(Arc::clone(&model), &params(8)).unwrap();
    assert!(matches!(
        ctx.eval(&[], Logits::Last),
        Err(ModelError::InvalidArgument(_))
    ));
    let e = ctx.eval(&[1, n_vocab as u32], Logits::Last).unwrap_err();
    assert!(
        matches!(e, ModelError::InvalidToken { .. })
            && e.to_string().contains(&n_vocab.to_string()),
        "{e}"
    );
    assert_eq!(ctx.n_past(), 0);
    ctx.eval(&[1, 5, 6, 7, 8, 9], Logits::Last).unwrap();
    let e = ctx.eval(&[10, 11, 12], Logits::Last).unwrap_err();
    assert!(
        matches!(
            e,
            ModelError::ContextFull {
                n_ctx: 8,
                n_past: 6,
                requested: 3
            }
        ),
        "{e}"
    );
    assert_eq!(ctx.n_past(), 6);
    ctx.eval(&[10, 11], Logits::Last).unwrap();
    assert!(matches!(
        ctx.eval(&[12], Logits::Last),
        Err(ModelError::ContextFull { .. })
    ));
    assert!(
        Context::new(Arc::clone(&model), &params(129)).is_err(),
        "n_ctx above the trained context"
    );
    assert!(Context::new(model, &params(0)).is_err());
}

/// Three sequences decoded in interleaved batches (prompts of different lengths, then one token
/// each per step, one sequence truncated and refilled) give each sequence the logits it gets
/// alone in its own context.
#[test]
fn sequences_in_one_batch_match_separate_contexts() {
    let model = load();
    let n_vocab = model.hparams.n_vocab;
    let prompts: Vec<Vec<u32>> = ["abc hello", "world ab hello abc", "b"]
        .iter()
        .map(|p| model.tokenizer.encode(p, true, false))
        .collect();
    let multi_params = ContextParams {
        n_seq: 3,
        ..params(32)
    };
    let mut multi = Context::new(Arc::clone(&model), &multi_params).unwrap();
    let mut alone: Vec<Context> = (0..3)
        .map(|_| Context::new(Arc::clone(&model), &params(32)).unwrap())
        .collect();
    let compare = |got: &[f32], want: &[f32], what: &str| {
        let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
        assert!(max_abs_diff(got, &want) < 1e-2, "{what}");
    };
    // Step 0: every prompt in one batch, logits of each prompt's last token.
    let mut batch = Vec::new();
    for (seq, p) in prompts.iter().enumerate() {
        for (i, &token) in p.iter().enumerate() {
            batch.push(BatchToken {
                token,
                seq,
                logits: i + 1 == p.len(),
            });
        }
    }
    let out = multi.decode(&batch).unwrap();
    assert_eq!(out.len(), 3 * n_vocab);
    for seq in 0..3 {
        let want = alone[seq].eval(&prompts[seq], Logits::Last).unwrap();
        compare(&out[seq * n_vocab..(seq + 1) * n_vocab], &want, "prompt");
        assert_eq!(multi.seq_len(seq), prompts[seq].len());
    }
    // Steps 1..4: one token per sequence, in a different order each step; sequence 1 is
    // truncated to 2 tokens before step 3.
    for step in 1..5u32 {
        if step == 3 {
            multi.truncate_seq(1, 2);
            alone[1].truncate(2);
        }
        let order: Vec<usize> = if step % 2 == 0 {
            vec![2, 0, 1]
        } else {
            vec![1, 2, 0]
        };
        let batch: Vec<BatchToken> = order
            .iter()
            .map(|&seq| BatchToken {
                token: 3 + step + seq as u32,
                seq,
                logits: true,
            })
            .collect();
        let out = multi.decode(&batch).unwrap();
        for (row, &seq) in order.iter().enumerate() {
            let want = alone[seq].eval(&[batch[row].token], Logits::Last).unwrap();
            compare(&out[row * n_vocab..(row + 1) * n_vocab], &want, "step");
            assert_eq!(multi.seq_len(seq), alone[seq].n_past());
        }
    }
    // A bad sequence id or a full sequence is refused and changes nothing.
    let lens: Vec<usize> = (0..3).map(|s| multi.seq_len(s)).collect();
    let bad = [BatchToken {
        token: 1,
        seq: 3,
        logits: true,
    }];
    assert!(matches!(
        multi.decode(&bad),
        Err(ModelError::InvalidArgument(_))
    ));
    let overflow: Vec<BatchToken> = (0..60)
        .map(|i| BatchToken {
            token: 1,
            seq: i % 2,
            logits: false,
        })
        .collect();
    assert!(matches!(
        multi.decode(&overflow),
        Err(ModelError::ContextFull { .. })
    ));
    assert_eq!((0..3).map(|s| multi.seq_len(s)).collect::<Vec<_>>(), lens);
}

/// The repack cache: the first load writes it, the second maps it (same logits, bit for bit),
/// and a corrupted, truncated or stale cache is a miss that repacks and rewrites it.
#[test]
fn repack_cache_round_trips_and_rejects_bad_files() {
    use kolibri::model::LoadOptions;
    if !kolibri::kernels::repacks(GgmlType::Q8_0) {
        return; // nothing is repacked on this target
    }
    let dir = std::env::temp_dir().join(format!("kolibri-repack-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model_path = dir.join("tiny.gguf");
    std::fs::write(&model_path, tiny_model_bytes().0).unwrap();
    let load = || {
        let mut opts = LoadOptions {
            repack_cache: Some(dir.join("cache")),
            ..Default::default()
        };
        Arc::new(Model::load_with(&model_path, &mut opts).unwrap())
    };
    let logits = |m: &Arc<Model>| {
        let mut ctx = Context::new(Arc::clone(m), &params(32)).unwrap();
        ctx.eval(&[1, 5, 9, 3, 7], Logits::All).unwrap()
    };
    let cache_file = || {
        let files: Vec<_> = std::fs::read_dir(dir.join("cache"))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        assert!(files.len() <= 1, "one cache file per model: {files:?}");
        files.into_iter().next()
    };

    let first = load();
    assert!(!first.repacked_from_cache);
    let want = logits(&first);
    let path = cache_file().expect("the first load writes the cache");
    let second = load();
    assert!(second.repacked_from_cache);
    assert_eq!(logits(&second), want);

    // Damage: one flipped byte in the last array, then a truncation. Each is a miss with the
    // same results, and the rewritten cache is used again.
    let damage: [fn(&mut Vec<u8>); 2] = [
        |b| {
            let at = b.len() - 3;
            b[at] ^= 0x10;
        },
        |b| b.truncate(b.len() / 2),
    ];
    for d in damage {
        let mut bytes = std::fs::read(&path).unwrap();
        d(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let m = load();
        assert!(!m.repacked_from_cache);
        assert_eq!(logits(&m), want);
        assert!(load().repacked_from_cache);
    }

    // A different model at the same path is not served the old weights.
    let (mut other, _) = tiny_model_bytes();
    let n = other.len();
    other[n - 40] ^= 0x01; // inside the last tensor (an f32 norm), file length unchanged
    std::fs::write(&model_path, &other).unwrap();
    let m = load();
    assert!(!m.repacked_from_cache);
    assert!(load().repacked_from_cache);
    assert_eq!(cache_file(), Some(path));
    std::fs::remove_dir_all(&dir).unwrap();
}
