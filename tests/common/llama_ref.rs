//! A tiny Llama-architecture model the tests write themselves (random weights, a small
//! SentencePiece vocabulary) and the naive f64 forward pass they check the engine against,
//! written from the architecture's definition (RMSNorm, interleaved RoPE, GQA, SwiGLU, tied
//! output) over the file's dequantized weights, whatever their type.

use kolibri::gguf::{GgufFile, GgufWriter, Value, ValueType};
use kolibri::quant::{dequantize_row, GgmlType};

/// The model's shape.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub embd: usize,
    pub head: usize,
    pub head_kv: usize,
    pub ff: usize,
    pub layers: usize,
}

pub const ROPE_BASE: f32 = 10_000.0;
pub const EPS: f32 = 1e-5;

impl Dims {
    pub fn head_dim(&self) -> usize {
        self.embd / self.head
    }
}

pub struct Rng(pub u64);
impl Rng {
    pub fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform() * scale).collect()
    }
}

/// Tokens, scores and token types of the vocabulary: control tokens, byte fallbacks, a few
/// pieces.
pub fn vocab() -> (Vec<String>, Vec<f32>, Vec<i32>) {
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

/// The GGUF image of a model of shape `d` whose matrices `matrix(values)` stores (returning
/// the type and bytes), with the vocabulary size.
pub fn llama_gguf(d: &Dims, matrix: impl Fn(&[f32]) -> (GgmlType, Vec<u8>)) -> (Vec<u8>, usize) {
    let (tokens, scores, types) = vocab();
    let n_vocab = tokens.len();
    let mut w = GgufWriter::new();
    let s = |v: &str| Value::String(v.into());
    let u = |v: usize| Value::U32(v as u32);
    w.metadata("general.architecture", s("llama"))
        .metadata("llama.context_length", Value::U32(128))
        .metadata("llama.embedding_length", u(d.embd))
        .metadata("llama.block_count", u(d.layers))
        .metadata("llama.feed_forward_length", u(d.ff))
        .metadata("llama.attention.head_count", u(d.head))
        .metadata("llama.attention.head_count_kv", u(d.head_kv))
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
    let mut add = |w: &mut GgufWriter, name: &str, k: usize, rows: usize| {
        let values = rng.vec(k * rows, 0.5 / (k as f32).sqrt() * 3.0);
        let (ty, bytes) = matrix(&values);
        w.tensor(name, &[k as u64, rows as u64], ty, bytes);
    };
    let (q, kv) = (d.head * d.head_dim(), d.head_kv * d.head_dim());
    add(&mut w, "token_embd.weight", d.embd, n_vocab);
    for il in 0..d.layers {
        let n = |t: &str| format!("blk.{il}.{t}");
        add(&mut w, &n("attn_q.weight"), d.embd, q);
        add(&mut w, &n("attn_k.weight"), d.embd, kv);
        add(&mut w, &n("attn_v.weight"), d.embd, kv);
        add(&mut w, &n("attn_output.weight"), q, d.embd);
        add(&mut w, &n("ffn_gate.weight"), d.embd, d.ff);
        add(&mut w, &n("ffn_up.weight"), d.embd, d.ff);
        add(&mut w, &n("ffn_down.weight"), d.ff, d.embd);
    }
    let mut rng2 = Rng(99);
    for il in 0..d.layers {
        for t in ["attn_norm.weight", "ffn_norm.weight"] {
            let v: Vec<f32> = rng2.vec(d.embd, 0.3).iter().map(|x| 1.0 + x).collect();
            w.tensor_f32(&format!("blk.{il}.{t}"), &[d.embd as u64], &v);
        }
    }
    let v: Vec<f32> = rng2.vec(d.embd, 0.3).iter().map(|x| 1.0 + x).collect();
    w.tensor_f32("output_norm.weight", &[d.embd as u64], &v);
    (w.to_bytes(), n_vocab)
}

/// The naive forward pass in f64 over `g`'s dequantized weights: the last token's logits.
pub fn reference_logits(g: &GgufFile, d: &Dims, tokens: &[u32]) -> Vec<f64> {
    let hd = d.head_dim();
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
        for head in x.chunks_mut(hd) {
            for i in 0..hd / 2 {
                let theta = pos as f64 * (ROPE_BASE as f64).powf(-2.0 * i as f64 / hd as f64);
                let (a, b) = (head[2 * i], head[2 * i + 1]);
                head[2 * i] = a * theta.cos() - b * theta.sin();
                head[2 * i + 1] = a * theta.sin() + b * theta.cos();
            }
        }
    };
    let embd = get("token_embd.weight");
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| embd[t as usize * d.embd..][..d.embd].to_vec())
        .collect();
    for il in 0..d.layers {
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
        let (mut qs, mut ks, mut vs) = (Vec::new(), Vec::new(), Vec::new());
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
            let mut attn = vec![0f64; d.head * hd];
            for h in 0..d.head {
                let kvh = h / (d.head / d.head_kv);
                let q = &qs[pos][h * hd..][..hd];
                let scores: Vec<f64> = (0..=pos)
                    .map(|p| {
                        q.iter()
                            .zip(&ks[p][kvh * hd..][..hd])
                            .map(|(a, b)| a * b)
                            .sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = scores.iter().map(|s| (s - m).exp()).sum();
                for p in 0..=pos {
                    let a = (scores[p] - m).exp() / z;
                    for i in 0..hd {
                        attn[h * hd + i] += a * vs[p][kvh * hd + i];
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
    matvec(&embd, &h)
}

/// Largest |a - b| over two logit vectors.
pub fn max_abs_diff(a: &[f32], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - y).abs())
        .fold(0.0, f64::max)
}

/// The range of a logit vector.
pub fn spread(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
}
