//! Where Jinja under transformers differs from minijinja's defaults, done the transformers
//! way: `tojson` is Python's `json.dumps` (no HTML escaping, `ensure_ascii`, `indent`,
//! `separators`, `sort_keys`), `is iterable` is false for none, and the `{% generation %}`
//! block (a marker for training masks) renders its body.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

/// `value | tojson(indent=None, ensure_ascii=False, separators=None, sort_keys=False)`.
pub(super) fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match kwargs.get::<Option<Value>>("indent")?.or(indent) {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) if v.kind() == ValueKind::Number => {
            Some(" ".repeat(i64::try_from(v)?.clamp(0, 64) as usize))
        }
        Some(v) => Some(
            v.as_str()
                .ok_or_else(|| bad("indent is a number or a string"))?
                .to_string(),
        ),
    };
    let (item_sep, key_sep) = match kwargs.get::<Option<Value>>("separators")? {
        Some(v) if !v.is_none() => {
            let pair: Vec<String> = v
                .try_iter()?
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("separators are two strings"))?;
            match <[String; 2]>::try_from(pair) {
                Ok([item, key]) => (item, key),
                Err(_) => return Err(bad("separators are two strings")),
            }
        }
        // Python's defaults: ", " inline, "," when indenting (lines end the items).
        _ if indent.is_some() => (",".to_string(), ": ".to_string()),
        _ => (", ".to_string(), ": ".to_string()),
    };
    let style = Style {
        indent,
        item_sep,
        key_sep,
        ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
        sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write_value(&mut out, value, &style, 0)?;
    // A plain string, as transformers' `tojson` returns: Jinja2's `Markup + json` escapes it.
    Ok(Value::from(out))
}

/// `x is iterable`: Python's `iter(x)` succeeds: strings, lists, dicts; not none or numbers.
pub(super) fn is_iterable(value: &Value) -> bool {
    !value.is_none() && value.try_iter().is_ok()
}

/// The template with `{% generation %}` / `{% endgeneration %}` turned into an always-true
/// `if` block, their whitespace control kept.
pub(super) fn without_generation_blocks(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        // The closing `%}` comes after the opening `{%` (in `{%}` they overlap).
        let Some(end) = tag[2..].find("%}").map(|e| e + 2) else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let (open_trim, body) = inner.strip_prefix('-').map_or(("", inner), |b| ("-", b));
        let (body, close_trim) = body.strip_suffix('-').map_or((body, ""), |b| (b, "-"));
        match body.trim() {
            "generation" => out.push_str(&format!("{{%{open_trim} if true {close_trim}%}}")),
            "endgeneration" => out.push_str(&format!("{{%{open_trim} endif {close_trim}%}}")),
            _ => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

struct Style {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    ensure_ascii: bool,
    sort_keys: bool,
}

/// Nesting beyond this is refused (a template could build a cycle-free but deep value).
const MAX_DEPTH: usize = 128;

fn write_value(out: &mut String, v: &Value, style: &Style, depth: usize) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(bad("value nested too deeply for tojson"));
    }
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, v),
        ValueKind::String => write_string(out, v.as_str().unwrap_or(""), style.ensure_ascii),
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if style.sort_keys {
                keys.sort_by_key(key_text);
            }
            let items = keys
                .into_iter()
                .map(|k| {
                    let item = v.get_item(&k)?;
                    Ok((k, item))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            write_container(out, '{', '}', items.len(), style, depth, |out, i| {
                let (k, item) = &items[i];
                write_string(out, &key_text(k), style.ensure_ascii);
                out.push_str(&style.key_sep);
                write_value(out, item, style, depth + 1)
            })?;
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            write_container(out, '[', ']', items.len(), style, depth, |out, i| {
                write_value(out, &items[i], style, depth + 1)
            })?;
        }
        kind => {
            return Err(bad(&format!(
                "Object of type {kind} is not JSON serializable"
            )));
        }
    }
    Ok(())
}

fn write_container(
    out: &mut String,
    open: char,
    close: char,
    len: usize,
    style: &Style,
    depth: usize,
    mut item: impl FnMut(&mut String, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if len == 0 {
        out.push(close);
        return Ok(());
    }
    let newline = |out: &mut String, level: usize| {
        if let Some(unit) = &style.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(unit);
            }
        }
    };
    for i in 0..len {
        if i > 0 {
            out.push_str(&style.item_sep);
        }
        newline(out, depth + 1);
        item(out, i)?;
    }
    newline(out, depth);
    out.push(close);
    Ok(())
}

/// Python turns dict keys into strings: `true`, `null`, numbers as `json.dumps` writes them.
fn key_text(k: &Value) -> String {
    match k.kind() {
        ValueKind::String => k.as_str().unwrap_or("").to_string(),
        ValueKind::None | ValueKind::Undefined => "null".into(),
        ValueKind::Bool => (if k.is_true() { "true" } else { "false" }).into(),
        _ => {
            let mut s = String::new();
            write_number(&mut s, k);
            s
        }
    }
}

fn write_number(out: &mut String, v: &Value) {
    if let Ok(i) = i64::try_from(v.clone()) {
        if v.as_i64().is_some() || !is_float(v) {
            out.push_str(&i.to_string());
            return;
        }
    }
    match f64::try_from(v.clone()) {
        Ok(f) => out.push_str(&python_float(f)),
        Err(_) => out.push_str(&v.to_string()),
    }
}

fn is_float(v: &Value) -> bool {
    // minijinja prints floats with a '.', 'e', "inf" or "NaN"; integers never.
    let s = v.to_string();
    s.contains(['.', 'e', 'E', 'n', 'N'])
}

/// `repr(float)`: the shortest digits that round-trip, fixed notation for exponents in
/// -4..16 (with ".0" when integral), else `d.ddde+XX`.
fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sci = format!("{:e}", f.abs()); // shortest round-trip digits: "2.15e1"
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let body = if exp < 0 {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                format!("{digits}{}.0", "0".repeat(int_len - digits.len()))
            } else {
                format!("{}.{}", &digits[..int_len], &digits[int_len..])
            }
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

fn write_string(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn bad(message: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        for (f, s) in [
            (21.5, "21.5"),
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123456789.125, "123456789.125"),
            (1e15, "1000000000000000.0"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(python_float(f), s, "{f}");
        }
    }

    #[test]
    fn generation_blocks_become_plain_blocks() {
        assert_eq!(
            without_generation_blocks("a{%- generation -%}b{% endgeneration %}{{ x }}{%if y%}"),
            "a{%- if true -%}b{% endif %}{{ x }}{%if y%}"
        );
        // Found by fuzz/fuzz_targets/chat_template.rs: `{%}` once sliced backwards.
        for source in ["{%}", "x{%}=", "{%%}", "{%-}", "{%"] {
            assert_eq!(without_generation_blocks(source), source);
            assert!(crate::chat::ChatTemplate::new(source, "", "").is_err());
        }
    }
}
