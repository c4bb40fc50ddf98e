//! Jinja2's `Markup` arithmetic, for templates that make safe strings.
//!
//! In Jinja2, `"<b>"|safe + text` escapes `text` (`Markup.__add__` HTML-escapes a plain
//! operand) even with autoescaping off, which is how transformers renders; and `a ~ b` joins
//! into a plain string. minijinja escapes in `+` only with autoescaping on, which would also
//! escape every printed value, set block and macro result. So in a template that applies a
//! markup-making filter, `rewrite` turns every `a + b` into a call of [`ADD`] and every `a ~ b`
//! into a call of [`JOIN`]. Other templates keep minijinja's operators.

use std::sync::OnceLock;

use minijinja::{context, Environment, Error, ErrorKind, Expression, Value};

/// The functions rewritten operators call (not names a template would use).
pub(super) const ADD: &str = "__kolibri_markup_add";
pub(super) const JOIN: &str = "__kolibri_markup_join";

/// Filters whose result is a Jinja2 `Markup` when autoescaping is off.
pub(super) const MARKUP_FILTERS: &[&str] = &["safe", "escape", "e", "forceescape"];

/// A string the rewritten operators may build; the render's fuel bounds it further.
const MAX_STRING: usize = 64 << 20;

/// Registers the functions rewritten templates call.
pub(super) fn register(env: &mut Environment<'_>) {
    env.add_function(ADD, markup_add);
    env.add_function(JOIN, plain_join);
}

/// `a + b` as Jinja2 computes it: a plain string beside a safe one is HTML-escaped and the sum
/// is safe; anything other than two strings adds as minijinja's `+` does.
fn markup_add(a: Value, b: Value) -> Result<Value, Error> {
    let (Some(x), Some(y)) = (a.as_str(), b.as_str()) else {
        return plain_add(a, b);
    };
    check_len(x.len() + y.len())?;
    if a.is_safe() == b.is_safe() {
        let sum = [x, y].concat();
        return Ok(if a.is_safe() {
            Value::from_safe_string(sum)
        } else {
            Value::from(sum)
        });
    }
    let (x, y) = if a.is_safe() {
        (x.to_owned(), escape(y))
    } else {
        (escape(x), y.to_owned())
    };
    check_len(x.len() + y.len())?;
    Ok(Value::from_safe_string(x + &y))
}

/// `a ~ b` as Jinja2 computes it with autoescaping off: a plain string, safe operands or not.
fn plain_join(a: Value, b: Value) -> Result<Value, Error> {
    let joined = format!("{a}{b}");
    check_len(joined.len())?;
    Ok(Value::from(joined))
}

/// minijinja's own `+` for every case but two strings (numbers, lists, tuples, errors).
fn plain_add(a: Value, b: Value) -> Result<Value, Error> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    static SUM: OnceLock<Result<Expression<'static, 'static>, Error>> = OnceLock::new();
    let env = ENV.get_or_init(Environment::new);
    let sum = SUM.get_or_init(|| env.compile_expression("a + b"));
    let sum = sum
        .as_ref()
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    // Without the helper expression's location: the caller's template line is what helps.
    sum.eval(context! { a, b })
        .map_err(|e| Error::new(e.kind(), e.detail().unwrap_or_default().to_owned()))
}

fn check_len(len: usize) -> Result<(), Error> {
    if len > MAX_STRING {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("a string of {len} bytes is longer than a chat template may build"),
        ));
    }
    Ok(())
}

/// markupsafe's `escape`: the five characters HTML gives meaning to.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}
