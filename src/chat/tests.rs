use super::*;

fn msg<'a>(role: &'a str, content: &'a str) -> ChatMessage<'a> {
    ChatMessage { role, content }
}

// A ChatML template in the style Qwen and others ship, with block tags on their own lines so
// trim_blocks / lstrip_blocks decide the output's whitespace.
const CHATML: &str = "{% for message in messages %}
    {% if loop.first and message.role != 'system' %}
<|im_start|>system
Default.<|im_end|>
    {% endif %}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor %}
{% if add_generation_prompt %}
<|im_start|>assistant
{% endif %}";

#[test]
fn renders_with_huggingface_whitespace_rules() {
    let t = ChatTemplate::new(CHATML, "<s>", "</s>").unwrap();
    let out = t.render(&[msg("user", "Hi")], true).unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nDefault.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let out = t
        .render(&[msg("system", "S"), msg("user", "Q")], false)
        .unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
    );
}

#[test]
fn special_tokens_python_methods_and_exceptions() {
    // Gemma-style: bos_token, alternation enforced with raise_exception, .strip() from Python.
    let src = "{{ bos_token }}{% for m in messages %}\
        {% if (m.role == 'user') != (loop.index0 % 2 == 0) %}\
        {{ raise_exception('roles must alternate user/assistant') }}{% endif %}\
        <start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n\
        {{ m.content.strip() }}<end_of_turn>\n{% endfor %}\
        {% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
    let t = ChatTemplate::new(src, "<bos>", "<eos>").unwrap();
    let out = t
        .render(&[msg("user", "  a  "), msg("assistant", "b")], true)
        .unwrap();
    assert_eq!(
        out,
        "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n<start_of_turn>model\n"
    );
    let err = t
        .render(&[msg("user", "a"), msg("user", "b")], true)
        .unwrap_err();
    assert!(matches!(err, ChatTemplateError::Render(_)));
    assert!(err.to_string().contains("roles must alternate"), "{err}");
}

#[test]
fn syntax_errors_are_reported_at_compile_time() {
    let err = ChatTemplate::new("{% for m in messages %}{{ m.content }}", "", "")
        .err()
        .expect("unclosed for");
    assert!(matches!(err, ChatTemplateError::Syntax(_)), "{err}");
}

#[test]
fn tojson_and_undefined_fields_behave_like_jinja() {
    // Undefined attributes are falsy and iterate as empty (Qwen's tool_calls checks rely on it).
    let src = "{% for m in messages %}{% if not m.tool_calls %}{{ m.content | tojson }}\
               {% endif %}{% for c in m.tool_calls %}x{% endfor %}{% endfor %}";
    let t = ChatTemplate::new(src, "", "").unwrap();
    assert_eq!(
        t.render(&[msg("user", "say \"hi\"")], false).unwrap(),
        "\"say \\\"hi\\\"\""
    );
}

#[test]
fn strftime_formats_utc_dates() {
    // 2024-02-29 13:05:09 UTC
    let t = 1_709_211_909;
    assert_eq!(
        clock::format_utc(t, "%d %B %Y, %b %e %H:%M:%S %%"),
        "29 February 2024, Feb 29 13:05:09 %"
    );
    assert_eq!(clock::format_utc(0, "%Y-%m-%d"), "1970-01-01");
    // Python's strftime on the same instants (weekday, day of year, no-padding flags, 12h).
    let all = "%A %a %j %-d %-m %y %I %p %F %T %Z %z %-H %-j";
    assert_eq!(
        clock::format_utc(1_709_298_307, all),
        "Friday Fri 061 1 3 24 01 PM 2024-03-01 13:05:07 UTC +0000 13 61"
    );
    assert_eq!(
        clock::format_utc(1_796_352_414, all),
        "Friday Fri 338 4 12 26 02 AM 2026-12-04 02:46:54 UTC +0000 2 338"
    );
    let year: i64 = clock::strftime_now("%Y".into()).parse().unwrap();
    assert!(year >= 2024);
}
