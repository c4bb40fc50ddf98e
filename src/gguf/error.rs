//! Typed errors for malformed or unsupported GGUF input.

use std::fmt;

#[derive(Debug)]
pub enum GgufError {
    /// The file could not be opened or mapped.
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The first four bytes are not `GGUF`.
    BadMagic([u8; 4]),
    /// A version other than 2 or 3 (or a big-endian file, whose version reads byte-swapped).
    UnsupportedVersion(u32),
    /// The file ends before `what` (which started at byte `offset`) is complete.
    Truncated {
        what: String,
        offset: u64,
    },
    /// A metadata value type id outside 0..=12.
    InvalidValueType {
        key: String,
        id: u32,
    },
    /// Arrays nested deeper than the reader allows.
    NestingTooDeep {
        key: String,
    },
    /// A count or length larger than the rest of the file could hold.
    CountTooLarge {
        what: String,
        count: u64,
    },
    DuplicateKey(String),
    /// A metadata key that is not a well-formed GGUF key (escaped for display).
    BadKey {
        index: usize,
        key: String,
        reason: &'static str,
    },
    /// A key Kolibri reads holds a value of another type than the specification gives it.
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },
    DuplicateTensor(String),
    /// `general.alignment` is not a non-zero power of two u32.
    BadAlignment(String),
    /// A tensor type id ggml does not define.
    UnknownTensorType {
        tensor: String,
        id: u32,
    },
    /// Dimension count, a zero/overflowing dimension, or a row that is not whole blocks.
    BadTensorShape {
        tensor: String,
        reason: String,
    },
    /// Tensor data offset not a multiple of the alignment.
    MisalignedTensor {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    /// Tensor data reaching past the end of the file.
    TensorOutOfBounds {
        tensor: String,
        offset: u64,
        size: u64,
        data_len: u64,
    },
    /// A part of a split model that does not fit the others, or cannot be found.
    Split {
        part: String,
        why: String,
    },
    /// A malformed part of a split model.
    InPart {
        part: String,
        source: Box<GgufError>,
    },
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError::*;
        match self {
            Io { path, source } => write!(f, "cannot read {path}: {source}"),
            BadMagic(m) => write!(f, "not a GGUF file (magic {m:02x?}, expected \"GGUF\")"),
            UnsupportedVersion(v) if v.swap_bytes() <= 3 => {
                write!(f, "big-endian GGUF (version {}) is not supported", v.swap_bytes())
            }
            UnsupportedVersion(v) => write!(f, "unsupported GGUF version {v} (supported: 2, 3)"),
            Truncated { what, offset } => {
                write!(f, "file truncated: {what} at byte {offset} runs past the end")
            }
            InvalidValueType { key, id } => {
                write!(f, "metadata key {key:?}: invalid value type id {id}")
            }
            NestingTooDeep { key } => write!(f, "metadata key {key:?}: arrays nested too deeply"),
            CountTooLarge { what, count } => {
                write!(f, "{what}: count {count} is larger than the file could hold")
            }
            DuplicateKey(k) => write!(f, "duplicate metadata key {k:?}"),
            BadKey { index, key, reason } => {
                write!(f, "metadata entry {index}: key \"{key}\" {reason}")
            }
            WrongType { key, expected, found } => {
                write!(f, "metadata key {key:?} holds {found}, the specification says {expected}")
            }
            DuplicateTensor(t) => write!(f, "duplicate tensor name {t:?}"),
            BadAlignment(a) => write!(f, "general.alignment must be a power-of-two u32, got {a}"),
            UnknownTensorType { tensor, id } => {
                write!(f, "tensor {tensor:?}: unknown ggml type id {id}")
            }
            BadTensorShape { tensor, reason } => write!(f, "tensor {tensor:?}: {reason}"),
            MisalignedTensor { tensor, offset, alignment } => write!(
                f,
                "tensor {tensor:?}: data offset {offset} is not a multiple of the alignment {alignment}"
            ),
            TensorOutOfBounds { tensor, offset, size, data_len } => write!(
                f,
                "tensor {tensor:?}: data [{offset}, {offset}+{size}) lies outside the data section \
                 of {data_len} bytes (truncated file or corrupt offset)"
            ),
            Split { part, why } => write!(f, "split model, {part}: {why}"),
            InPart { part, source } => write!(f, "split model, {part}: {source}"),
        }
    }
}

impl GgufError {
    /// The error itself, or for a split model's malformed part, what is wrong with it.
    pub fn root(&self) -> &GgufError {
        match self {
            GgufError::InPart { source, .. } => source.root(),
            other => other,
        }
    }
}

impl std::error::Error for GgufError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GgufError::Io { source, .. } => Some(source),
            GgufError::InPart { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
