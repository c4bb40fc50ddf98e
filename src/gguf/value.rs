//! Metadata values.

use std::borrow::Cow;
use std::sync::Arc;

use super::strings::PackedStrings;

/// GGUF metadata value type ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }
}

/// One metadata value. Strings that are not valid UTF-8 are kept lossily converted
/// (vocabularies of some models contain such pieces; their bytes are rarely needed).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// Elements of one type (nested arrays allowed).
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    /// Any integer type that fits in u64 (negative values give `None`).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer type that fits in i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v as i64),
            Value::U16(v) => Some(v as i64),
            Value::U32(v) => Some(v as i64),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v as i64),
            Value::I16(v) => Some(v as i64),
            Value::I32(v) => Some(v as i64),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// Any numeric type as f64 (integers converted).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    pub fn as_f32(&self) -> Option<f32> {
        self.as_f64().map(|v| v as f32)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// An array of `elem` values (see [`Array::new`]).
    pub fn array(elem: ValueType, items: Vec<Value>) -> Value {
        Value::Array(Array::new(elem, items))
    }

    /// The whole value as text: strings as they are, numbers and booleans as Rust prints them,
    /// arrays as `[a, b, ...]` with their string elements quoted (JSON-like).
    pub fn to_text(&self) -> String {
        fn element(v: &Value, out: &mut String) {
            match v {
                Value::String(s) => out.push_str(&format!("{s:?}")),
                other => out.push_str(&other.to_text()),
            }
        }
        match self {
            Value::U8(v) => v.to_string(),
            Value::I8(v) => v.to_string(),
            Value::U16(v) => v.to_string(),
            Value::I16(v) => v.to_string(),
            Value::U32(v) => v.to_string(),
            Value::I32(v) => v.to_string(),
            Value::U64(v) => v.to_string(),
            Value::I64(v) => v.to_string(),
            Value::F32(v) => v.to_string(),
            Value::F64(v) => v.to_string(),
            Value::Bool(v) => v.to_string(),
            Value::String(s) => s.clone(),
            Value::Array(items) => {
                let mut out = String::from("[");
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    element(&v, &mut out);
                }
                out.push(']');
                out
            }
        }
    }

    /// A short rendering for display (arrays summarised).
    pub fn summary(&self) -> String {
        match self {
            Value::String(s) if s.chars().count() > 60 => {
                format!("{:?}...", s.chars().take(60).collect::<String>())
            }
            Value::String(s) => format!("{s:?}"),
            Value::Array(a) => format!("[{:?}; {}]", a.elem_type(), a.len()),
            other => format!("{other:?}"),
        }
    }
}

/// `pick` of every element, if it picks them all.
fn all<T>(items: &[Value], pick: fn(&Value) -> Option<T>) -> Option<Vec<T>> {
    items.iter().map(pick).collect()
}

/// A metadata array. Vocabularies are arrays of 100-260 thousand strings and numbers; held as
/// one [`Value`] each (32 bytes plus a heap block per string) they cost about 20 MB of heap
/// per model, so strings, i32 and f32 elements are stored packed. The storage is shared: a
/// clone (the tokenizer's, of the token texts) costs no copy.
#[derive(Clone, Debug)]
pub struct Array {
    elem: ValueType,
    items: Arc<Items>,
}

/// Equal element types and values, however each side stores them (copied or left in the
/// file).
impl PartialEq for Array {
    fn eq(&self, other: &Array) -> bool {
        self.elem == other.elem
            && (Arc::ptr_eq(&self.items, &other.items)
                || self.len() == other.len() && self.iter().eq(other.iter()))
    }
}

#[derive(Clone, Debug)]
enum Items {
    /// The strings one after another, at most 4 GiB of text.
    Strings(PackedStrings),
    I32(Vec<i32>),
    /// An i32 array whose values all fit a byte (token types: 1-6), a quarter the memory.
    I32AsI8(Vec<i8>),
    F32(Vec<f32>),
    /// Little-endian f32 elements left in a file mapping (see [`Array::f32s_in_file`]).
    FileF32(FileF32s),
    /// GGUF strings left in a file mapping (see [`Array::strings_in_file`]).
    FileStrings(FileStrings),
    /// Any other element type, one value each.
    Values(Vec<Value>),
}

/// `len` little-endian f32 at byte `at` of a mapping (any alignment).
#[derive(Clone, Debug)]
struct FileF32s {
    map: Arc<memmap2::Mmap>,
    at: usize,
    len: usize,
}

impl FileF32s {
    fn get(&self, i: usize) -> Option<f32> {
        if i >= self.len {
            return None;
        }
        let b = self.map.get(self.at + 4 * i..self.at + 4 * i + 4)?;
        Some(f32::from_le_bytes(b.try_into().ok()?))
    }
}

/// `len` GGUF strings (u64 length, then UTF-8 bytes) from byte `at` of a mapping, with the
/// offset from `at` of every [`FILE_STRINGS_ANCHOR`]th string.
#[derive(Clone, Debug)]
pub(crate) struct FileStrings {
    map: Arc<memmap2::Mmap>,
    at: usize,
    len: usize,
    anchors: Vec<u32>,
}

/// Strings per anchor of [`FileStrings`]: string `i` is found past at most this many - 1.
const FILE_STRINGS_ANCHOR: usize = 8;

impl FileStrings {
    /// Starts a list at byte `at` of `map`; [`FileStrings::push`] each string's offset.
    pub(crate) fn new(map: Arc<memmap2::Mmap>, at: usize, len: usize) -> FileStrings {
        FileStrings {
            map,
            at,
            len,
            anchors: Vec::with_capacity(len.div_ceil(FILE_STRINGS_ANCHOR)),
        }
    }

    /// Notes string `i` at byte `offset` from the start (every string in order); false past
    /// 4 GiB of strings.
    pub(crate) fn note(&mut self, i: usize, offset: usize) -> bool {
        if i.is_multiple_of(FILE_STRINGS_ANCHOR) {
            let Ok(offset) = u32::try_from(offset) else {
                return false;
            };
            self.anchors.push(offset);
        }
        true
    }

    fn get(&self, i: usize) -> Option<&str> {
        if i >= self.len {
            return None;
        }
        let mut at = self.at + *self.anchors.get(i / FILE_STRINGS_ANCHOR)? as usize;
        let mut read = || -> Option<&[u8]> {
            let len = u64::from_le_bytes(self.map.get(at..at + 8)?.try_into().ok()?);
            let start = at + 8;
            at = start.checked_add(usize::try_from(len).ok()?)?;
            self.map.get(start..at)
        };
        for _ in 0..i % FILE_STRINGS_ANCHOR {
            read()?;
        }
        std::str::from_utf8(read()?).ok()
    }
}

impl Array {
    /// An array of `elem` values. Elements of another type are kept as they are (the writer
    /// writes them as they are too).
    pub fn new(elem: ValueType, items: Vec<Value>) -> Array {
        let packed = match elem {
            ValueType::String => {
                let mut strings = Array::strings_with_capacity(items.len());
                for v in &items {
                    match v {
                        Value::String(s) if strings.push_str(s) => {}
                        _ => return Array::values(elem, items),
                    }
                }
                Some(strings)
            }
            ValueType::I32 => all(&items, |v| match v {
                Value::I32(x) => Some(*x),
                _ => None,
            })
            .map(Array::from_i32s),
            ValueType::F32 => all(&items, |v| match v {
                Value::F32(x) => Some(*x),
                _ => None,
            })
            .map(Array::from_f32s),
            _ => None,
        };
        packed.unwrap_or_else(|| Array::values(elem, items))
    }

    fn values(elem: ValueType, items: Vec<Value>) -> Array {
        Array {
            elem,
            items: Arc::new(Items::Values(items)),
        }
    }

    /// An empty string array with room for `n` strings.
    pub(crate) fn strings_with_capacity(n: usize) -> Array {
        Array {
            elem: ValueType::String,
            items: Arc::new(Items::Strings(PackedStrings::with_capacity(n))),
        }
    }

    /// Appends a string (to a string array made by [`Array::strings_with_capacity`]); false,
    /// with nothing appended, past 4 GiB of text.
    pub(crate) fn push_str(&mut self, s: &str) -> bool {
        match Arc::make_mut(&mut self.items) {
            Items::Strings(strings) => strings.push(s),
            _ => true,
        }
    }

    /// Frees the spare capacity a string array grew while it was read.
    pub(crate) fn shrink_to_fit(&mut self) {
        if let Items::Strings(strings) = Arc::make_mut(&mut self.items) {
            strings.shrink_to_fit();
        }
    }

    /// An i32 array.
    pub(crate) fn from_i32s(v: Vec<i32>) -> Array {
        let bytes: Option<Vec<i8>> = v.iter().map(|&x| i8::try_from(x).ok()).collect();
        Array {
            elem: ValueType::I32,
            items: Arc::new(match bytes {
                Some(b) => Items::I32AsI8(b),
                None => Items::I32(v),
            }),
        }
    }

    /// An f32 array.
    pub(crate) fn from_f32s(v: Vec<f32>) -> Array {
        Array {
            elem: ValueType::F32,
            items: Arc::new(Items::F32(v)),
        }
    }

    /// An f32 array of `len` elements left in `map` at byte `at` (bytes the caller checked
    /// are there): it costs no memory of its own, and only the pages read are brought in.
    pub(crate) fn f32s_in_file(map: Arc<memmap2::Mmap>, at: usize, len: usize) -> Array {
        Array {
            elem: ValueType::F32,
            items: Arc::new(Items::FileF32(FileF32s { map, at, len })),
        }
    }

    /// A string array left in its file mapping (strings the reader checked are there and
    /// valid UTF-8): for an array read once at load (a BPE merge list, 1.9 MB for Qwen2.5's
    /// 151k merges), whose pages are released afterwards.
    pub(crate) fn strings_in_file(strings: FileStrings) -> Array {
        Array {
            elem: ValueType::String,
            items: Arc::new(Items::FileStrings(strings)),
        }
    }

    pub fn elem_type(&self) -> ValueType {
        self.elem
    }

    pub fn len(&self) -> usize {
        match &*self.items {
            Items::Strings(strings) => strings.len(),
            Items::I32(v) => v.len(),
            Items::I32AsI8(v) => v.len(),
            Items::F32(v) => v.len(),
            Items::FileF32(v) => v.len,
            Items::FileStrings(v) => v.len,
            Items::Values(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`: borrowed where it is stored as a [`Value`], built otherwise.
    pub fn get(&self, i: usize) -> Option<Cow<'_, Value>> {
        Some(match &*self.items {
            Items::Strings(_) | Items::FileStrings(_) => {
                Cow::Owned(Value::String(self.str(i)?.to_owned()))
            }
            Items::I32(v) => Cow::Owned(Value::I32(*v.get(i)?)),
            Items::I32AsI8(v) => Cow::Owned(Value::I32(*v.get(i)? as i32)),
            Items::F32(v) => Cow::Owned(Value::F32(*v.get(i)?)),
            Items::FileF32(v) => Cow::Owned(Value::F32(v.get(i)?)),
            Items::Values(v) => Cow::Borrowed(v.get(i)?),
        })
    }

    /// String element `i` without a copy (`None` past the end or if it is not a string).
    pub fn str(&self, i: usize) -> Option<&str> {
        match &*self.items {
            Items::Strings(strings) => strings.get(i),
            Items::FileStrings(strings) => strings.get(i),
            Items::Values(v) => v.get(i)?.as_str(),
            _ => None,
        }
    }

    /// Whether the elements are read from the file's mapping where they are (memory the
    /// process holds only while their pages are resident), not copied.
    pub fn is_in_file(&self) -> bool {
        matches!(&*self.items, Items::FileF32(_) | Items::FileStrings(_))
    }

    /// Whether every element is an f32, held packed (so [`Array::f32`] is cheap).
    pub fn is_packed_f32(&self) -> bool {
        matches!(&*self.items, Items::F32(_) | Items::FileF32(_))
    }

    /// Element `i` as f32, if it is a number.
    pub fn f32(&self, i: usize) -> Option<f32> {
        match &*self.items {
            Items::F32(v) => v.get(i).copied(),
            Items::FileF32(v) => v.get(i),
            _ => self.get(i)?.as_f32(),
        }
    }

    /// Element `i` as i64, if it is an integer.
    pub fn i64(&self, i: usize) -> Option<i64> {
        match &*self.items {
            Items::I32(v) => v.get(i).map(|&x| x as i64),
            Items::I32AsI8(v) => v.get(i).map(|&x| x as i64),
            _ => self.get(i)?.as_i64(),
        }
    }

    /// Every element in order (see [`Array::get`]).
    pub fn iter(&self) -> impl Iterator<Item = Cow<'_, Value>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}
