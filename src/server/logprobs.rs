//! Log-probabilities in OpenAI's two shapes: chat's `{"content": [{token, logprob, bytes,
//! top_logprobs}]}` and the completions endpoint's `{tokens, token_logprobs, top_logprobs,
//! text_offset}`.

use crate::batching::TokenLogprob;
use crate::tokenizer::{TokenId, Tokenizer};
use serde_json::{json, Map, Value};

use super::stream::Flavor;

/// The `logprobs` object of one choice (or one stream chunk); `offset` is where the entries'
/// text starts in the completion, advanced past it.
pub fn choice_logprobs(
    flavor: Flavor,
    tokenizer: &Tokenizer,
    entries: &[TokenLogprob],
    offset: &mut usize,
) -> Value {
    match flavor {
        Flavor::Chat => chat(tokenizer, entries),
        Flavor::Completion => completion(tokenizer, entries, offset),
    }
}

fn chat(tokenizer: &Tokenizer, entries: &[TokenLogprob]) -> Value {
    let one = |id: TokenId, logprob: f32| {
        let bytes = tokenizer.token_bytes(id, false);
        json!({
            "token": String::from_utf8_lossy(&bytes),
            "logprob": finite(logprob),
            "bytes": bytes,
        })
    };
    let content: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = one(e.token, e.logprob);
            let top: Vec<Value> = e.top.iter().map(|&(id, lp)| one(id, lp)).collect();
            v["top_logprobs"] = Value::Array(top);
            v
        })
        .collect();
    json!({ "content": content, "refusal": null })
}

fn completion(tokenizer: &Tokenizer, entries: &[TokenLogprob], offset: &mut usize) -> Value {
    let text =
        |id: TokenId| String::from_utf8_lossy(&tokenizer.token_bytes(id, false)).into_owned();
    let mut tokens = Vec::new();
    let mut logprobs = Vec::new();
    let mut tops = Vec::new();
    let mut offsets = Vec::new();
    for e in entries {
        let t = text(e.token);
        offsets.push(*offset);
        *offset += t.len();
        tokens.push(t);
        logprobs.push(finite(e.logprob));
        let top: Map<String, Value> = e
            .top
            .iter()
            .map(|&(id, lp)| (text(id), finite(lp)))
            .collect();
        tops.push(Value::Object(top));
    }
    json!({
        "tokens": tokens,
        "token_logprobs": logprobs,
        "top_logprobs": tops,
        "text_offset": offsets,
    })
}

/// JSON has no -inf: a token the model gives no chance at all reports OpenAI's floor.
fn finite(logprob: f32) -> Value {
    json!(if logprob.is_finite() {
        logprob
    } else {
        -9999.0
    })
}
