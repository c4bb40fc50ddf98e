//! `Context::embed` and pooling on the real 0.5B model: the hidden states are the forward
//! pass's own (the cache they leave continues exactly like a plain evaluation), and pooled
//! sentence vectors rank a paraphrase above unrelated text.

mod common;

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, Logits, Model, Pooling};

fn context(model: &Arc<Model>, n_seq: usize) -> Context {
    let params = ContextParams {
        n_ctx: 256,
        n_seq,
        n_threads: common::threads(),
        ..Default::default()
    };
    Context::new(Arc::clone(model), &params).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn embeddings_are_the_forward_pass_and_rank_paraphrases_first() {
    let model = Arc::new(
        Model::load(common::model_path(
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ))
        .unwrap(),
    );
    let tok = &model.tokenizer;
    let n_embd = model.hparams.n_embd;
    let tokens = tok.encode("The quick brown fox jumps over the lazy dog", true, false);
    let (head, last) = tokens.split_at(tokens.len() - 1);

    // The cache `embed` fills is the one a plain evaluation fills: the next token's logits
    // match bit for bit.
    let mut ctx = context(&model, 2);
    let hidden = ctx.embed(1, head).unwrap();
    assert_eq!(hidden.len(), head.len() * n_embd);
    assert!(hidden.iter().all(|v| v.is_finite()));
    let after_embed = ctx
        .decode(&[kolibri::model::BatchToken {
            token: last[0],
            seq: 1,
            logits: true,
        }])
        .unwrap();
    let mut plain = context(&model, 1);
    assert_eq!(plain.eval(&tokens, Logits::Last).unwrap(), after_embed);

    // The same text gives the same vector whatever the context held before.
    let again = ctx.embed(1, head).unwrap();
    assert_eq!(again, hidden);

    let embed = |ctx: &mut Context, text: &str| {
        let t = tok.encode(text, true, false);
        Pooling::of_model(&model).pool(&ctx.embed(0, &t).unwrap(), n_embd)
    };
    let cat = embed(&mut ctx, "The cat sat on the mat.");
    let paraphrase = embed(&mut ctx, "A cat was sitting on the mat.");
    let other = embed(&mut ctx, "Quarterly revenue grew by eight percent in Asia.");
    assert!((cosine(&cat, &cat) - 1.0).abs() < 1e-4, "unit length");
    assert!(
        cosine(&cat, &paraphrase) > cosine(&cat, &other),
        "{} vs {}",
        cosine(&cat, &paraphrase),
        cosine(&cat, &other)
    );
    assert!(ctx.embed(5, head).is_err());
}
