//! The GGUF specification's rules on metadata that the byte-level reader does not check:
//! well-formed keys, and for every key Kolibri reads, a value of the type the specification
//! gives it. A file that breaks them is refused with the key and both types named, instead of
//! the engine reading a default or a reinterpreted value.

use super::error::GgufError;
use super::value::{Value, ValueType};

/// What a key's value must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Str,
    /// Any integer type holding a non-negative value.
    Uint,
    /// f32 or f64.
    Float,
    Bool,
    StrArray,
    FloatArray,
    IntArray,
    /// A period (uint) or one flag per layer (array of bool).
    UintOrBoolArray,
    /// One value for the model or one per layer (array of integers).
    UintOrIntArray,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Uint => "a non-negative integer",
            Kind::Float => "a float",
            Kind::Bool => "a bool",
            Kind::StrArray => "an array of strings",
            Kind::FloatArray => "an array of f32",
            Kind::IntArray => "an array of integers",
            Kind::UintOrBoolArray => "a non-negative integer or an array of bools",
            Kind::UintOrIntArray => "a non-negative integer or an array of integers",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        let elem = |v: &Value| v.as_array().map(|a| a.elem_type());
        let int_type = |t: ValueType| {
            use ValueType::*;
            matches!(t, U8 | I8 | U16 | I16 | U32 | I32 | U64 | I64)
        };
        match self {
            Kind::Str => matches!(v, Value::String(_)),
            Kind::Uint => v.as_u64().is_some(),
            Kind::Float => matches!(v, Value::F32(_) | Value::F64(_)),
            Kind::Bool => matches!(v, Value::Bool(_)),
            Kind::StrArray => elem(v) == Some(ValueType::String),
            Kind::FloatArray => elem(v) == Some(ValueType::F32),
            Kind::IntArray => elem(v).is_some_and(int_type),
            Kind::UintOrBoolArray => v.as_u64().is_some() || elem(v) == Some(ValueType::Bool),
            Kind::UintOrIntArray => v.as_u64().is_some() || elem(v).is_some_and(int_type),
        }
    }
}

/// Keys outside any architecture's namespace.
const GLOBAL: &[(&str, Kind)] = &[
    ("general.architecture", Kind::Str),
    ("general.name", Kind::Str),
    ("general.file_type", Kind::Uint),
    ("general.quantization_version", Kind::Uint),
    ("tokenizer.ggml.model", Kind::Str),
    ("tokenizer.ggml.pre", Kind::Str),
    ("tokenizer.ggml.tokens", Kind::StrArray),
    ("tokenizer.ggml.scores", Kind::FloatArray),
    ("tokenizer.ggml.token_type", Kind::IntArray),
    ("tokenizer.ggml.merges", Kind::StrArray),
    ("tokenizer.ggml.add_bos_token", Kind::Bool),
    ("tokenizer.ggml.add_eos_token", Kind::Bool),
    ("tokenizer.ggml.add_sep_token", Kind::Bool),
    ("tokenizer.ggml.add_space_prefix", Kind::Bool),
    ("tokenizer.ggml.normalizer.lowercase", Kind::Bool),
    ("tokenizer.ggml.normalizer.strip_accents", Kind::Bool),
    ("tokenizer.chat_template", Kind::Str),
    ("split.no", Kind::Uint),
    ("split.count", Kind::Uint),
    ("split.tensors.count", Kind::Uint),
];

/// Keys under `<architecture>.`.
const PER_ARCH: &[(&str, Kind)] = &[
    ("context_length", Kind::Uint),
    ("embedding_length", Kind::Uint),
    ("block_count", Kind::Uint),
    ("feed_forward_length", Kind::UintOrIntArray),
    ("pooling_type", Kind::Uint),
    ("attention.head_count", Kind::UintOrIntArray),
    ("attention.head_count_kv", Kind::UintOrIntArray),
    ("attention.key_length", Kind::Uint),
    ("attention.value_length", Kind::Uint),
    ("attention.layer_norm_rms_epsilon", Kind::Float),
    ("attention.layer_norm_epsilon", Kind::Float),
    ("attention.sliding_window", Kind::Uint),
    ("attention.sliding_window_pattern", Kind::UintOrBoolArray),
    ("attn_logit_softcapping", Kind::Float),
    ("final_logit_softcapping", Kind::Float),
    ("rope.dimension_count", Kind::Uint),
    ("rope.freq_base", Kind::Float),
    ("rope.freq_base_swa", Kind::Float),
    ("rope.scale_linear", Kind::Float),
    ("rope.scaling.type", Kind::Str),
    ("rope.scaling.factor", Kind::Float),
    ("rope.scaling.attn_factor", Kind::Float),
    ("rope.scaling.original_context_length", Kind::Uint),
    ("expert_count", Kind::Uint),
    ("expert_used_count", Kind::Uint),
    ("expert_feed_forward_length", Kind::Uint),
    ("expert_shared_feed_forward_length", Kind::Uint),
    ("expert_weights_scale", Kind::Float),
    ("expert_weights_norm", Kind::Bool),
];

/// The kind a key's value must have, if Kolibri reads it.
fn kind_of(key: &str, arch: Option<&str>) -> Option<Kind> {
    if let Some(&(_, kind)) = GLOBAL.iter().find(|(k, _)| *k == key) {
        return Some(kind);
    }
    if key.starts_with("tokenizer.chat_template.") {
        return Some(Kind::Str);
    }
    if key.starts_with("tokenizer.ggml.") && key.ends_with("_token_id") {
        return Some(Kind::Uint);
    }
    let rest = key.strip_prefix(arch?)?.strip_prefix('.')?;
    PER_ARCH
        .iter()
        .find(|(k, _)| *k == rest)
        .map(|&(_, kind)| kind)
}

/// A key is non-empty ASCII without spaces or control characters, in `.`-separated parts
/// none of which is empty.
fn check_key(index: usize, key: &str) -> Result<(), GgufError> {
    let reason = if key.is_empty() {
        Some("is empty")
    } else if !key.bytes().all(|b| b.is_ascii_graphic()) {
        Some("is not printable ASCII without spaces")
    } else if key.split('.').any(str::is_empty) {
        Some("has an empty `.`-separated part")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(GgufError::BadKey {
            index,
            key: key.escape_debug().to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The type of `v` as the specification names it ("u32", "array of string").
fn type_name(v: &Value) -> String {
    let scalar = |t: ValueType| format!("{t:?}").to_lowercase();
    match v {
        Value::Array(a) => format!("array of {}", scalar(a.elem_type())),
        Value::U8(_) => "u8".into(),
        Value::I8(_) => "i8".into(),
        Value::U16(_) => "u16".into(),
        Value::I16(_) => "i16".into(),
        Value::U32(_) => "u32".into(),
        Value::I32(x) if *x < 0 => "i32 (negative)".into(),
        Value::I32(_) => "i32".into(),
        Value::I64(x) if *x < 0 => "i64 (negative)".into(),
        Value::I64(_) => "i64".into(),
        Value::U64(_) => "u64".into(),
        Value::F32(_) => "f32".into(),
        Value::F64(_) => "f64".into(),
        Value::Bool(_) => "bool".into(),
        Value::String(_) => "string".into(),
    }
}

/// Checks every key's form, and the type of every key Kolibri reads.
pub(super) fn check(metadata: &[(String, Value)]) -> Result<(), GgufError> {
    let arch = metadata
        .iter()
        .find(|(k, _)| k == "general.architecture")
        .and_then(|(_, v)| v.as_str());
    for (index, (key, value)) in metadata.iter().enumerate() {
        check_key(index, key)?;
        if let Some(kind) = kind_of(key, arch) {
            if !kind.accepts(value) {
                return Err(GgufError::WrongType {
                    key: key.clone(),
                    expected: kind.name(),
                    found: type_name(value),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::value::Value;

    fn meta(entries: &[(&str, Value)]) -> Vec<(String, Value)> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn well_formed_metadata_passes() {
        let m = meta(&[
            ("general.architecture", Value::String("qwen2".into())),
            ("qwen2.context_length", Value::U32(32768)),
            ("qwen2.rope.freq_base", Value::F32(1e6)),
            ("tokenizer.ggml.bos_token_id", Value::I32(1)),
            (
                "tokenizer.ggml.tokens",
                Value::array(ValueType::String, vec![Value::String("a".into())]),
            ),
            ("some.unknown.key", Value::Bool(true)),
        ]);
        check(&m).unwrap();
    }

    #[test]
    fn malformed_keys_are_refused() {
        for key in ["", "a..b", ".a", "a.", "with space", "tab\tkey", "ünïcode"] {
            let err = check(&meta(&[(key, Value::U32(1))])).unwrap_err();
            assert!(matches!(err, GgufError::BadKey { .. }), "{key:?}: {err}");
        }
    }

    #[test]
    fn a_read_key_of_the_wrong_type_names_the_key_and_both_types() {
        let arch = ("general.architecture", Value::String("llama".into()));
        let cases = [
            (
                "llama.context_length",
                Value::String("4096".into()),
                "string",
            ),
            ("llama.block_count", Value::I32(-2), "i32 (negative)"),
            ("llama.rope.freq_base", Value::U32(10000), "u32"),
            (
                "llama.attention.head_count_kv",
                Value::array(ValueType::F32, vec![Value::F32(8.0)]),
                "array of f32",
            ),
            (
                "tokenizer.ggml.scores",
                Value::array(ValueType::F64, vec![Value::F64(0.0)]),
                "array of f64",
            ),
            (
                "tokenizer.ggml.token_type",
                Value::array(ValueType::F32, vec![Value::F32(1.0)]),
                "array of f32",
            ),
            (
                "tokenizer.ggml.merges",
                Value::array(ValueType::U8, vec![Value::U8(1)]),
                "array of u8",
            ),
            ("tokenizer.ggml.eos_token_id", Value::F32(2.0), "f32"),
            ("tokenizer.ggml.add_bos_token", Value::U8(1), "u8"),
        ];
        for (key, value, found) in cases {
            let err = check(&meta(&[arch.clone(), (key, value)])).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(key) && text.contains(found), "{text}");
        }
    }

    #[test]
    fn keys_of_another_architecture_are_not_read() {
        let m = meta(&[
            ("general.architecture", Value::String("llama".into())),
            ("qwen2.context_length", Value::String("x".into())),
        ]);
        check(&m).unwrap();
    }
}
