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

fn render_with(source: &str, ctx: minijinja::Value) -> Result<String, ChatTemplateError> {
    let t = ChatTemplate::new(source, "<s>", "</s>")?;
    t.render_values(
        ctx.get_attr("messages").unwrap(),
        ctx.get_attr("tools").unwrap(),
        false,
        minijinja::Value::from(()),
    )
}

#[test]
fn markup_escapes_the_plain_operand_of_plus_as_jinja2_does() {
    // Expected texts are what Jinja2 3.1 renders with autoescaping off.
    let messages = context! { a => "<a & 'b'>", n => 2 };
    let ctx = context! { messages => messages, tools => () };
    let cases = [
        ("{{ '<x>'|safe + messages.a }}", "<x>&lt;a &amp; &#39;b&#39;&gt;"),
        ("{{ messages.a + '<x>'|safe }}", "&lt;a &amp; &#39;b&#39;&gt;<x>"),
        ("{{ ('<x>'|safe + messages.a) + messages.a }}", "<x>&lt;a &amp; &#39;b&#39;&gt;&lt;a &amp; &#39;b&#39;&gt;"),
        ("{{ '<x>'|safe + ('<y>' + messages.a) }}", "<x>&lt;y&gt;&lt;a &amp; &#39;b&#39;&gt;"),
        ("{{ '<'|safe + '<'|safe }}{{ messages.a + '\"' }}", "<<<a & 'b'>\""),
        // `~` joins into a plain string, safe operands or not.
        ("{{ ('<'|safe ~ '<'|safe) + '&' }}", "<<&"),
        ("{{ '<'|safe ~ '&' }}", "<&"),
        // Numbers and lists still add, in a template that makes markup.
        ("{{ ''|safe }}{{ messages.n + 3 }} {{ ([1] + [messages.n])|list }} {{ 1.5 + messages.n }}", "5 [1, 2] 3.5"),
        ("{{ '&'|e + messages.a }}", "&amp;&lt;a &amp; &#39;b&#39;&gt;"),
    ];
    for (source, expected) in cases {
        assert_eq!(
            render_with(source, ctx.clone()).unwrap(),
            expected,
            "{source}"
        );
    }
    // Without a markup filter the template is not rewritten, and `+` never escapes.
    assert_eq!(
        render_with("{{ messages.a + '<x>' }}", ctx.clone()).unwrap(),
        "<a & 'b'><x>"
    );
    // Errors stay errors.
    let err = render_with("{{ ''|safe }}{{ messages.n + [1] }}", ctx.clone()).unwrap_err();
    assert!(err.to_string().contains("+ operator"), "{err}");
    assert!(!err.to_string().contains("<expression>"), "{err}");
}

#[test]
fn markup_arithmetic_is_bounded() {
    let source = "{{ ''|safe }}{% set ns = namespace(s='<ab>') %}{% for i in range(40) %}\
                  {% set ns.s = ns.s + ns.s|safe %}{% endfor %}{{ ns.s|length }}";
    let ctx = context! { messages => context! {}, tools => () };
    let err = render_with(source, ctx).unwrap_err();
    assert!(matches!(err, ChatTemplateError::Render(_)), "{err}");
}

#[test]
fn a_namespace_cannot_hold_itself() {
    let t = |source: &str| {
        ChatTemplate::new(source, "<s>", "</s>")
            .unwrap()
            .render(&[], false)
    };
    let cycles = [
        "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}",
        "{% set ns = namespace() %}{% set ns.me = [1] + [ns] %}{{ ns }}",
        "{% set ns = namespace() %}{% set x, ns.me = 1, {'a': [ns]} -%}\n{{ ns }}",
        "{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}{{ a == b }}",
        "{% set ns = namespace(x=[]) %}{% for i in range(200) %}{% set ns.x = [ns.x] %}{% endfor %}",
    ];
    for source in cycles {
        let err = t(source).unwrap_err().to_string();
        assert!(err.contains("would hold itself"), "{source}: {err}");
    }
    // What templates do with namespaces still works, whitespace control included.
    let fine = "{% set ns = namespace(found=false, n=0, seen=[]) %}\n{% for i in range(3) -%}\n  \
                {% set ns.n = ns.n + i -%}\n  {% set ns.seen = ns.seen + [i] %}\n{% endfor %}\
                {{ ns.n }} {{ ns.seen }}";
    assert_eq!(t(fine).unwrap(), "3 [0, 1, 2]");
    // Values in parentheses, tuples and a trailing comma: the check still lands before `%}`.
    let shapes = "{% set ns = namespace() %}{% set ns.a = (1 + 2) %}{% set ns.b = (ns.a, 1) -%}\n\
                  {% set ns.c = 4, %}{% set ns.d = ((ns.a)) +%}\n{{ ns.a }} {{ ns.b }} {{ ns.c }} {{ ns.d }}";
    assert_eq!(t(shapes).unwrap(), "\n3 (3, 1) (4,) 3"); // as Jinja2 3.1.6 renders it
}
