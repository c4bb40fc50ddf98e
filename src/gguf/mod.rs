//! GGUF container reader: versions 2 and 3, zero-copy over a memory map.
//!
//! Every size, offset, count and dimension is checked; malformed input yields a [`GgufError`]
//! naming the problem, never a panic.

mod error;
mod reader;
mod schema;
mod split;
mod strings;
mod value;
mod writer;

pub use error::GgufError;
pub use reader::{GgufFile, Part, TensorInfo};
pub use split::{PartFile, SplitName, SplitSet};
pub use value::{Array, Value, ValueType};
pub use writer::{GgufHeader, GgufWriter};
