//! A small GGUF writer: builds files for tests, fuzz seeds and tools.

use super::value::{Value, ValueType};
use crate::quant::GgmlType;

/// Collects metadata and tensors, then serialises them as GGUF version 3.
pub struct GgufWriter {
    alignment: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter {
            alignment: 32,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn metadata(&mut self, key: &str, value: Value) -> &mut Self {
        if key == "general.alignment" {
            if let Value::U32(a) = value {
                self.alignment = a.max(1) as u64;
            }
        }
        self.metadata.push((key.to_owned(), value));
        self
    }

    /// Adds a tensor; `dims` innermost first, `data` its raw bytes.
    pub fn tensor(&mut self, name: &str, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> &mut Self {
        self.tensors
            .push((name.to_owned(), dims.to_vec(), ty, data));
        self
    }

    /// Adds an F32 tensor.
    pub fn tensor_f32(&mut self, name: &str, dims: &[u64], values: &[f32]) -> &mut Self {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, dims, GgmlType::F32, data)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let header = GgufHeader {
            alignment: self.alignment,
            metadata: &self.metadata,
            tensors: self
                .tensors
                .iter()
                .map(|(name, dims, ty, data)| {
                    (name.as_str(), dims.as_slice(), *ty, data.len() as u64)
                })
                .collect(),
        };
        let (mut out, offsets) = header.to_bytes();
        let data_start = out.len() as u64;
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize((data_start + off) as usize, 0);
            out.extend_from_slice(data);
        }
        out
    }
}

/// A GGUF version 3 header, for files whose tensor data is written after it (a tool streaming
/// tensors it makes one at a time): the metadata and each tensor's name, dims, type and size.
pub struct GgufHeader<'a> {
    /// Of the tensor data (a `general.alignment` in `metadata` must agree).
    pub alignment: u64,
    pub metadata: &'a [(String, Value)],
    pub tensors: Vec<(&'a str, &'a [u64], GgmlType, u64)>,
}

impl GgufHeader<'_> {
    /// The header bytes, padded to the alignment (the data section starts right after), and
    /// each tensor's offset within the data section (each aligned).
    pub fn to_bytes(&self) -> (Vec<u8>, Vec<u64>) {
        let align = self.alignment.max(1);
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in self.metadata {
            write_str(&mut out, k);
            out.extend_from_slice(&(value_type(v) as u32).to_le_bytes());
            write_value(&mut out, v);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for &(name, dims, ty, size) in &self.tensors {
            write_str(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + size).div_ceil(align) * align;
        }
        let data_start = (out.len() as u64).div_ceil(align) * align;
        out.resize(data_start as usize, 0);
        (out, offsets)
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn value_type(v: &Value) -> ValueType {
    match v {
        Value::U8(_) => ValueType::U8,
        Value::I8(_) => ValueType::I8,
        Value::U16(_) => ValueType::U16,
        Value::I16(_) => ValueType::I16,
        Value::U32(_) => ValueType::U32,
        Value::I32(_) => ValueType::I32,
        Value::F32(_) => ValueType::F32,
        Value::Bool(_) => ValueType::Bool,
        Value::String(_) => ValueType::String,
        Value::Array(..) => ValueType::Array,
        Value::U64(_) => ValueType::U64,
        Value::I64(_) => ValueType::I64,
        Value::F64(_) => ValueType::F64,
    }
}

fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(*x as u8),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.extend_from_slice(&(items.elem_type() as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for it in items.iter() {
                write_value(out, &it);
            }
        }
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}
