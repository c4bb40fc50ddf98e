//! The real Qwen2.5 chat template from the GGUF, rendered as Hugging Face's
//! apply_chat_template renders it (the ChatML layout Qwen documents), and a model without a
//! template reporting so.

mod common;

use kolibri::chat::{ChatMessage, ChatTemplate, ChatTemplateError};
use kolibri::model::Model;

fn msg<'a>(role: &'a str, content: &'a str) -> ChatMessage<'a> {
    ChatMessage { role, content }
}

#[test]
fn qwen_template_renders_chatml() {
    let model = Model::load(common::model_path(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    ))
    .unwrap();
    let t = ChatTemplate::from_model(&model).unwrap();
    // No system message: the template supplies Qwen's default one.
    let out = t.render(&[msg("user", "Hi there")], true).unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful \
         assistant.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    );
    let out = t
        .render(
            &[
                msg("system", "Be brief."),
                msg("user", "2+2?"),
                msg("assistant", "4"),
                msg("user", "And 3+3?"),
            ],
            false,
        )
        .unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n\
         <|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n"
    );
    // The rendered prompt's special tokens are single tokens when parsed as special.
    let ids = model.tokenizer.encode(&out, false, true);
    let im_start = model.tokenizer.encode("<|im_start|>", false, true);
    assert_eq!(im_start.len(), 1);
    assert_eq!(ids.iter().filter(|&&id| id == im_start[0]).count(), 4);
}

#[test]
fn a_model_without_a_template_says_so() {
    let model = Model::load(common::model_path("gemma-3-270m-q4_k_m.gguf")).unwrap();
    let err = ChatTemplate::from_model(&model)
        .err()
        .expect("gemma GGUF has no template");
    assert!(matches!(err, ChatTemplateError::NoTemplate));
}

/// Templates are code shipped inside model files: ones written to loop, recurse, explode or
/// call what does not exist fail quickly with an error, and the next render works.
#[test]
fn hostile_templates_fail_fast_and_harm_nothing() {
    let hostile = [
        ("endless loop", "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}"),
        ("deep recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
        ("huge output", "{{ 'x' * 4000000000 }}"),
        ("doubling", "{% set s = namespace(v='ab') %}{% for i in range(64) %}{% set s.v = s.v + s.v %}{% endfor %}{{ s.v }}"),
        ("undefined function", "{{ nothing_here() }}"),
        ("raise", "{{ raise_exception('no') }}"),
    ];
    let messages = [ChatMessage {
        role: "user",
        content: "hi",
    }];
    for (what, source) in hostile {
        let started = std::time::Instant::now();
        let result =
            ChatTemplate::new(source, "<s>", "</s>").and_then(|t| t.render(&messages, true));
        assert!(result.is_err(), "{what} rendered");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{what} took {:?}",
            started.elapsed()
        );
    }
    let fine =
        ChatTemplate::new("{% for m in messages %}{{ m.content }}{% endfor %}", "", "").unwrap();
    assert_eq!(fine.render(&messages, true).unwrap(), "hi");
}
