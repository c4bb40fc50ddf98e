//! Namespaces that cannot hold themselves.
//!
//! A namespace is minijinja's one mutable object, so it is the one way a template can build a
//! reference cycle (`{% set ns.me = [ns] %}`) or an unbounded nesting (the same in a loop).
//! Printing, comparing or serialising such a value recurses without end, and an `Arc` cycle is
//! never freed. So every assignment to a namespace attribute is followed by [`SETTLED`]
//! (`rewrite.rs` puts it there), which walks the value just assigned: deeper than
//! [`MAX_DEPTH`], or larger than [`MAX_NODES`], it is taken out again and the render fails.

use minijinja::value::ValueKind;
use minijinja::{context, Environment, Error, ErrorKind, Value};

/// The check's name in rewritten templates.
pub(super) const SETTLED: &str = "__kolibri_namespace_settled";

/// Nesting a namespace attribute may hold: tool schemas nest a dozen levels; a cycle, forever.
const MAX_DEPTH: usize = 128;

/// Containers and items one assigned value may hold.
const MAX_NODES: usize = 1 << 20;

pub(super) fn register(env: &mut Environment<'_>) {
    env.add_function(SETTLED, settled);
}

/// After `{% set holder.name = value %}`: the value must be finite and not too large.
fn settled(holder: Value, name: &str) -> Result<Value, Error> {
    let value = holder.get_attr(name)?;
    let mut budget = MAX_NODES;
    if bounded(&value, MAX_DEPTH, &mut budget) {
        return Ok(Value::from(()));
    }
    // Break the cycle before failing, or the namespace and what it holds are never freed.
    let unset = format!("{{% set holder.{name} = none %}}");
    let _ = Environment::new().render_str(&unset, context! { holder });
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "namespace attribute `{name}` would hold itself, or values nested deeper than \
             {MAX_DEPTH} or more than {MAX_NODES} of them"
        ),
    ))
}

/// Whether `value` is within `depth` levels and the node budget.
fn bounded(value: &Value, depth: usize, budget: &mut usize) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    let is_map = match value.kind() {
        ValueKind::Map => true,
        // Lazy sequences too: `[1] + [ns]` is one, and the budget bounds their length.
        ValueKind::Seq | ValueKind::Iterable => false,
        _ => return true, // strings, numbers, functions: nothing inside
    };
    if depth == 0 {
        return false;
    }
    let Ok(items) = value.try_iter() else {
        return true;
    };
    for item in items {
        let child = if is_map {
            value.get_item(&item).unwrap_or_default()
        } else {
            item
        };
        if !bounded(&child, depth - 1, budget) {
            return false;
        }
    }
    true
}
