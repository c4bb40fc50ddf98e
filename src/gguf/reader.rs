//! Parsing of the GGUF header, metadata and tensor table.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::error::GgufError;
use super::split::SplitSet;
use super::value::{Array, FileStrings, Value, ValueType};
use crate::quant::GgmlType;

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml tensors have at most 4 dimensions.
const MAX_DIMS: u32 = 4;
/// Nested arrays deeper than this are rejected (guards the recursion).
const MAX_ARRAY_DEPTH: u32 = 8;

/// One entry of the tensor table.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, innermost (contiguous) first, as ggml's `ne`.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of its part's data section.
    pub offset: u64,
    /// Which part of a split model holds the data (0 in a single file).
    pub part: usize,
    /// Size of the data in bytes.
    pub size: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Number of rows (product of all dimensions but the first).
    pub fn n_rows(&self) -> u64 {
        self.dims[1..].iter().product()
    }
}

enum Backing {
    /// Shared with the metadata arrays left in the file (see [`FILE_ARRAY_MIN`]).
    Mapped(Arc<memmap2::Mmap>),
    Owned(Vec<u8>),
}

/// Fewest elements of an f32 metadata array that is read in place from a mapped file rather
/// than copied: a vocabulary's scores (1 MB for 262k tokens) are read a few at a time while
/// encoding, so after the header's pages are released only those stay in memory.
const FILE_ARRAY_MIN: u64 = 4096;

/// String arrays left in a mapped file (at least [`FILE_ARRAY_MIN`] long) rather than copied:
/// read once at load (the tokenizer builds its merge table from them), after which their pages
/// are released with the rest of the header.
const STRINGS_IN_FILE: [&str; 1] = ["tokenizer.ggml.merges"];

/// A parsed GGUF file, or the parts of a split model as one ([`super::split`]): the first
/// part's metadata, every part's tensors. Tensor data is borrowed from the mapping, never
/// copied.
pub struct GgufFile {
    backing: Backing,
    version: u32,
    metadata: Vec<(String, Value)>,
    metadata_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    parts: Vec<Part>,
}

/// Where one part (the file itself, unless split) lies in the image.
#[derive(Clone, Debug)]
pub struct Part {
    /// Offset of the part in the image.
    pub base: usize,
    /// Its length in bytes.
    pub len: usize,
    /// Offset of its data section from `base`: the bytes before are its header.
    pub data_offset: u64,
    /// The file it was read from (none for an image made in memory).
    pub path: Option<std::path::PathBuf>,
}

impl Part {
    /// The part's header (metadata and tensor index) within the image.
    pub fn header(&self) -> std::ops::Range<usize> {
        self.base..self.base + (self.data_offset as usize).min(self.len)
    }

    /// The part's data section within the image.
    pub fn data(&self) -> std::ops::Range<usize> {
        self.header().end..self.base + self.len
    }
}

impl GgufFile {
    /// Maps and parses the file at `path`; a part of a split model brings all its parts.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let single = SplitSet::from_paths(vec![path.to_path_buf()])?;
        let file = Self::from_split(single.map()?, &single)?;
        let set = SplitSet::of(path, &file)?;
        if set.is_single() {
            return Ok(file);
        }
        drop(file);
        Self::from_split(set.map()?, &set)
    }

    /// [`GgufFile::open`] on one path; the parts of a split model in order, whatever their
    /// names, on several.
    pub fn open_parts(paths: &[std::path::PathBuf]) -> Result<GgufFile, GgufError> {
        match paths {
            [path] => Self::open(path),
            _ => {
                let set = SplitSet::from_paths(paths.to_vec())?;
                Self::from_split(set.map()?, &set)
            }
        }
    }

    /// Parses a file already mapped (or read into an anonymous mapping) by the caller; the
    /// model loader uses this to prefault pages, lock them, or read without `mmap`.
    pub fn from_mmap(map: memmap2::Mmap) -> Result<GgufFile, GgufError> {
        let len = map.len();
        Self::parse(Backing::Mapped(Arc::new(map)), &[(0, len)], &|_| {
            String::new()
        })
    }

    /// Parses the image of `set` ([`SplitSet::map`], or its files read into memory at their
    /// bases): one file, or every part of a split model, checked to be one model's.
    pub fn from_split(image: memmap2::Mmap, set: &SplitSet) -> Result<GgufFile, GgufError> {
        let spans: Vec<_> = set.parts().iter().map(|p| (p.base, p.len)).collect();
        if spans
            .last()
            .is_some_and(|&(base, len)| image.len() < base + len)
        {
            return Err(GgufError::Truncated {
                what: "the image of the parts".into(),
                offset: image.len() as u64,
            });
        }
        let mut file = Self::parse(Backing::Mapped(Arc::new(image)), &spans, &|i| set.name(i))?;
        for (part, of) in file.parts.iter_mut().zip(set.parts()) {
            part.path = Some(of.path.clone());
        }
        Ok(file)
    }

    /// Parses an in-memory GGUF image (tests, fuzzing).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        let len = bytes.len();
        Self::parse(Backing::Owned(bytes), &[(0, len)], &|_| String::new())
    }

    /// Parses in-memory images of the parts of a split model, in order (tests, fuzzing).
    pub fn from_part_bytes(parts: &[Vec<u8>]) -> Result<GgufFile, GgufError> {
        let page = super::split::page_size();
        let mut image = Vec::new();
        let mut spans = Vec::new();
        for p in parts {
            spans.push((image.len(), p.len()));
            image.extend_from_slice(p);
            image.resize(image.len().next_multiple_of(page), 0);
        }
        let count = parts.len();
        Self::parse(Backing::Owned(image), &spans, &|i| {
            format!("part {} of {count}", i + 1)
        })
    }

    /// Parses the parts at `spans` (offset, length) of the backing: one, or a split model's.
    /// `name` names part `i` in errors.
    fn parse(
        backing: Backing,
        spans: &[(usize, usize)],
        name: &dyn Fn(usize) -> String,
    ) -> Result<GgufFile, GgufError> {
        let (bytes, map): (&[u8], _) = match &backing {
            Backing::Mapped(m) => (m, Some(m)),
            Backing::Owned(v) => (v, None),
        };
        let mut headers = Vec::with_capacity(spans.len());
        for (i, &(base, len)) in spans.iter().enumerate() {
            let header = bytes
                .get(base..base + len)
                .ok_or_else(|| GgufError::Truncated {
                    what: "the image of the parts".into(),
                    offset: bytes.len() as u64,
                })
                .and_then(|part| parse_header(part, map, base));
            headers.push(match (header, spans.len()) {
                (Ok(h), _) => h,
                (Err(e), 1) => return Err(e),
                (Err(e), _) => {
                    return Err(GgufError::InPart {
                        part: name(i),
                        source: Box::new(e),
                    })
                }
            });
        }
        super::split::check_parts(&headers, name)?;
        let parts = spans
            .iter()
            .zip(&headers)
            .map(|(&(base, len), h)| Part {
                base,
                len,
                data_offset: h.data_offset,
                path: None,
            })
            .collect();
        let mut headers = headers.into_iter().enumerate();
        let (_, first) = headers.next().expect("at least one part");
        let mut tensors = first.tensors;
        for (i, h) in headers {
            tensors.extend(h.tensors.into_iter().map(|t| TensorInfo { part: i, ..t }));
        }
        Ok(GgufFile {
            version: first.version,
            metadata_index: index_of(&first.metadata, |(k, _)| k),
            tensor_index: index_of(&tensors, |t| &t.name),
            metadata: first.metadata,
            tensors,
            alignment: first.alignment,
            parts,
            backing,
        })
    }

    fn bytes(&self) -> &[u8] {
        match &self.backing {
            Backing::Mapped(m) => m,
            Backing::Owned(v) => v,
        }
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section within the file (the first part's, if split).
    pub fn data_offset(&self) -> u64 {
        self.parts[0].data_offset
    }

    /// Where each part lies in [`GgufFile::file_bytes`] (one for a single file).
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Bytes of the file, or of all parts of a split model.
    pub fn size_on_disk(&self) -> u64 {
        self.parts.iter().map(|p| p.len as u64).sum()
    }

    /// Whether the file is a mapping (its pages can be dropped and read again), not a copy.
    pub fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped(_))
    }

    /// All metadata in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata_index.get(key).map(|&i| &self.metadata[i].1)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key)?.as_f32()
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    pub fn get_array(&self, key: &str) -> Option<&Array> {
        self.get(key)?.as_array()
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// Where the tensor's data starts in [`GgufFile::file_bytes`].
    pub fn tensor_start(&self, t: &TensorInfo) -> usize {
        let part = &self.parts[t.part];
        part.base + (part.data_offset + t.offset) as usize
    }

    /// The tensor's data bytes (bounds were checked at parse time).
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let start = self.tensor_start(t);
        &self.bytes()[start..start + t.size as usize]
    }

    /// The whole image: the file, or every part of a split model each at its
    /// [`Part::base`] (for page-release bookkeeping, and weights addressed by offset).
    pub fn file_bytes(&self) -> &[u8] {
        self.bytes()
    }
}

fn index_of<T>(items: &[T], key: impl Fn(&T) -> &String) -> HashMap<String, usize> {
    items
        .iter()
        .enumerate()
        .map(|(i, t)| (key(t).clone(), i))
        .collect()
}

/// One file's header, parsed.
pub(super) struct Header {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    pub data_offset: u64,
}

impl Header {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A bounds-checked little-endian cursor.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The mapping `bytes` lies in (at `base`), where arrays may stay in place.
    map: Option<&'a Arc<memmap2::Mmap>>,
    base: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what: what(),
                offset: self.pos as u64,
            });
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what)?;
        Ok(s.try_into().expect("take returned N bytes"))
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        Ok(self.str(what)?.into_owned())
    }

    /// A string, borrowed unless it has to be made valid UTF-8.
    fn str(&mut self, what: &dyn Fn() -> String) -> Result<Cow<'a, str>, GgufError> {
        let len = self.u64(what)?;
        let raw = self.take(len, what)?;
        Ok(String::from_utf8_lossy(raw))
    }

    /// Checks that `count` items of at least `min_size` bytes each can fit in the rest.
    fn check_count(
        &self,
        count: u64,
        min_size: u64,
        what: &dyn Fn() -> String,
    ) -> Result<(), GgufError> {
        if count
            .checked_mul(min_size)
            .is_none_or(|need| need > self.remaining())
        {
            return Err(GgufError::CountTooLarge {
                what: what(),
                count,
            });
        }
        Ok(())
    }
}

/// Parses the file in `bytes`, which lies at `base` of `map` (if mapped).
fn parse_header(
    bytes: &[u8],
    map: Option<&Arc<memmap2::Mmap>>,
    base: usize,
) -> Result<Header, GgufError> {
    let mut c = Cursor {
        bytes,
        pos: 0,
        map,
        base,
    };
    let magic: [u8; 4] = c.array(&|| "magic".into())?;
    if &magic != MAGIC {
        return Err(GgufError::BadMagic(magic));
    }
    let version = c.u32(&|| "version".into())?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let n_tensors = c.u64(&|| "tensor count".into())?;
    let n_kv = c.u64(&|| "metadata count".into())?;
    // Smallest metadata entry: key length (8) + type (4) + a 1-byte value.
    c.check_count(n_kv, 13, &|| "metadata count".into())?;

    let mut metadata = Vec::with_capacity(n_kv as usize);
    let mut seen_keys = std::collections::HashSet::new();
    for i in 0..n_kv {
        let key = c.string(&|| format!("key of metadata entry {i}"))?;
        let type_id = c.u32(&|| format!("type of metadata key {key:?}"))?;
        let vt = ValueType::from_id(type_id).ok_or_else(|| GgufError::InvalidValueType {
            key: key.clone(),
            id: type_id,
        })?;
        let value = read_value(&mut c, vt, &key, 0)?;
        if !seen_keys.insert(key.clone()) {
            return Err(GgufError::DuplicateKey(key));
        }
        metadata.push((key, value));
    }
    super::schema::check(&metadata)?;

    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) if a.is_power_of_two() => *a as u64,
        Some((_, v)) => return Err(GgufError::BadAlignment(v.summary())),
    };

    // Smallest tensor entry: name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
    c.check_count(n_tensors, 32, &|| "tensor count".into())?;
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    for i in 0..n_tensors {
        tensors.push(read_tensor_info(&mut c, i, alignment)?);
    }

    let data_offset = (c.pos as u64).div_ceil(alignment) * alignment;
    let data_len = (bytes.len() as u64).saturating_sub(data_offset);
    let mut seen_names = std::collections::HashSet::new();
    for t in &tensors {
        if !seen_names.insert(t.name.as_str()) {
            return Err(GgufError::DuplicateTensor(t.name.clone()));
        }
        if t.offset
            .checked_add(t.size)
            .is_none_or(|end| end > data_len)
        {
            return Err(GgufError::TensorOutOfBounds {
                tensor: t.name.clone(),
                offset: t.offset,
                size: t.size,
                data_len,
            });
        }
    }
    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

fn read_tensor_info(c: &mut Cursor, index: u64, alignment: u64) -> Result<TensorInfo, GgufError> {
    let name = c.string(&|| format!("name of tensor {index}"))?;
    let n_dims = c.u32(&|| format!("dimension count of tensor {name:?}"))?;
    let shape_err = |reason: String| GgufError::BadTensorShape {
        tensor: name.clone(),
        reason,
    };
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(shape_err(format!(
            "{n_dims} dimensions (allowed 1..={MAX_DIMS})"
        )));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        let ne = c.u64(&|| format!("dimension {d} of tensor {name:?}"))?;
        if ne == 0 || ne > i64::MAX as u64 {
            return Err(shape_err(format!("dimension {d} is {ne}")));
        }
        dims.push(ne);
    }
    let type_id = c.u32(&|| format!("type of tensor {name:?}"))?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        tensor: name.clone(),
        id: type_id,
    })?;
    let offset = c.u64(&|| format!("data offset of tensor {name:?}"))?;
    if offset % alignment != 0 {
        return Err(GgufError::MisalignedTensor {
            tensor: name,
            offset,
            alignment,
        });
    }
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| {
            acc.checked_mul(d).filter(|&n| n <= i64::MAX as u64)
        })
        .ok_or_else(|| shape_err(format!("element count of {dims:?} overflows")))?;
    let row_bytes = ggml_type.row_bytes(dims[0]).ok_or_else(|| {
        shape_err(format!(
            "row length {} is not a multiple of the {} block size {}",
            dims[0],
            ggml_type,
            ggml_type.block_size()
        ))
    })?;
    let size = row_bytes
        .checked_mul(n_elements / dims[0])
        .ok_or_else(|| shape_err("byte size overflows".into()))?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        size,
        part: 0,
    })
}

fn read_value(c: &mut Cursor, vt: ValueType, key: &str, depth: u32) -> Result<Value, GgufError> {
    let what = || format!("value of metadata key {key:?}");
    Ok(match vt {
        ValueType::U8 => Value::U8(c.array::<1>(&what)?[0]),
        ValueType::I8 => Value::I8(c.array::<1>(&what)?[0] as i8),
        ValueType::U16 => Value::U16(u16::from_le_bytes(c.array(&what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(c.array(&what)?)),
        ValueType::U32 => Value::U32(c.u32(&what)?),
        ValueType::I32 => Value::I32(i32::from_le_bytes(c.array(&what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(c.array(&what)?)),
        ValueType::U64 => Value::U64(c.u64(&what)?),
        ValueType::I64 => Value::I64(i64::from_le_bytes(c.array(&what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(c.array(&what)?)),
        ValueType::Bool => Value::Bool(c.array::<1>(&what)?[0] != 0),
        ValueType::String => Value::String(c.string(&what)?),
        ValueType::Array => {
            if depth >= MAX_ARRAY_DEPTH {
                return Err(GgufError::NestingTooDeep {
                    key: key.to_owned(),
                });
            }
            let type_id = c.u32(&what)?;
            let elem = ValueType::from_id(type_id).ok_or_else(|| GgufError::InvalidValueType {
                key: key.to_owned(),
                id: type_id,
            })?;
            let count = c.u64(&what)?;
            c.check_count(count, min_encoded_size(elem), &|| format!("array {key:?}"))?;
            let n = count as usize;
            // The vocabulary's arrays are read straight into packed storage.
            let array = match elem {
                ValueType::String if count >= FILE_ARRAY_MIN && STRINGS_IN_FILE.contains(&key) => {
                    match c
                        .map
                        .map(|map| strings_in_file(c, map, n, &what))
                        .transpose()?
                    {
                        Some(Some(array)) => array,
                        _ => read_strings(c, n, &what)?,
                    }
                }
                ValueType::String => read_strings(c, n, &what)?,
                ValueType::I32 => Array::from_i32s(
                    (0..n)
                        .map(|_| Ok(i32::from_le_bytes(c.array(&what)?)))
                        .collect::<Result<_, GgufError>>()?,
                ),
                ValueType::F32 => match c.map {
                    Some(map) if count >= FILE_ARRAY_MIN => {
                        let at = c.pos;
                        c.take(4 * count, &what)?;
                        Array::f32s_in_file(map.clone(), c.base + at, n)
                    }
                    _ => Array::from_f32s(
                        (0..n)
                            .map(|_| Ok(f32::from_le_bytes(c.array(&what)?)))
                            .collect::<Result<_, GgufError>>()?,
                    ),
                },
                _ => {
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(read_value(c, elem, key, depth + 1)?);
                    }
                    Array::new(elem, items)
                }
            };
            Value::Array(array)
        }
    })
}

/// `n` strings into packed storage.
fn read_strings(c: &mut Cursor, n: usize, what: &dyn Fn() -> String) -> Result<Array, GgufError> {
    let mut strings = Array::strings_with_capacity(n);
    for _ in 0..n {
        if !strings.push_str(&c.str(what)?) {
            return Err(GgufError::CountTooLarge {
                what: format!("{} (over 4 GiB of text)", what()),
                count: n as u64,
            });
        }
    }
    strings.shrink_to_fit();
    Ok(strings)
}

/// `n` strings left where they are in `map`, checked; `None` (the cursor where it was) when
/// one is not valid UTF-8 or they span over 4 GiB: the caller packs them instead.
fn strings_in_file(
    c: &mut Cursor,
    map: &Arc<memmap2::Mmap>,
    n: usize,
    what: &dyn Fn() -> String,
) -> Result<Option<Array>, GgufError> {
    let at = c.pos;
    let mut strings = FileStrings::new(Arc::clone(map), c.base + at, n);
    for i in 0..n {
        let fits = strings.note(i, c.pos - at);
        let len = c.u64(what)?;
        if !fits || std::str::from_utf8(c.take(len, what)?).is_err() {
            c.pos = at;
            return Ok(None);
        }
    }
    Ok(Some(Array::strings_in_file(strings)))
}

/// The fewest bytes one value of this type can occupy in the file.
fn min_encoded_size(vt: ValueType) -> u64 {
    match vt {
        ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
        ValueType::U16 | ValueType::I16 => 2,
        ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
        ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
        ValueType::Array => 12,
    }
}
