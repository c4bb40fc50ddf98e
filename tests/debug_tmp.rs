mod common;
use kolibri::gguf::GgufFile;
use kolibri::kernels::{matmul, QuantizedActivations, WeightMatrix};
use kolibri::quant::dequantize_row;

#[test]
fn dbg() {
    for (m, names) in [("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", vec!["blk.0.ffn_gate.weight", "blk.0.ffn_down.weight", "blk.0.attn_v.weight"]),
                       ("gemma-3-270m-q4_k_m.gguf", vec!["blk.0.ffn_gate.weight", "blk.0.ffn_down.weight", "blk.0.attn_q.weight", "token_embd.weight"])] {
        let g = GgufFile::open(common::model_path(m)).unwrap();
        for n in names {
            let t = g.tensor(n).unwrap();
            let (k, rows) = (t.dims[0] as usize, t.dims[1] as usize);
            let rows = rows.min(64);
            let data = g.tensor_data(t);
            let rb = data.len() / t.dims[1] as usize;
            let data = &data[..rows * rb];
            let x: Vec<f32> = (0..k).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0)).collect();
            let act = QuantizedActivations::quantize(&x, 1, k, t.ggml_type).unwrap();
            let mut out = vec![0.0; rows];
            matmul(&WeightMatrix { ty: t.ggml_type, rows, k, data }, &act, &mut out).unwrap();
            let mut maxrel = 0f64;
            for r in 0..rows {
                let mut w = vec![0.0; k];
                dequantize_row(t.ggml_type, &data[r * rb..(r + 1) * rb], &mut w).unwrap();
                let exact: f64 = w.iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
                let scale: f64 = w.iter().zip(&x).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
                maxrel = maxrel.max((out[r] as f64 - exact).abs() / scale);
            }
            eprintln!("{m} {n} {} k={k}: max err/sum|terms| = {maxrel:.2e}", t.ggml_type);
        }
    }
}
