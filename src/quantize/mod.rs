//! `kolibri quantize`: a GGUF file's weights converted to another type or K-quant mix and
//! streamed, tensor by tensor, into a new file (what llama-quantize does without an
//! importance matrix). The plan for every tensor is made and checked before anything is
//! written; the output appears under its name only once complete.

mod mix;

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

pub use mix::{fit_row, is_quantized, weight_type, FileType, Place, Role};

use crate::gguf::{GgufError, GgufFile, GgufHeader, TensorInfo, Value};
use crate::quant::dequant::is_supported as can_dequantize;
use crate::quant::encode::{can_quantize, quantize_row};
use crate::quant::{dequantize_row, GgmlType};

/// What to make of the input.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The weights' type or mix; `None` copies every tensor as it is (to split or join a
    /// file, as llama-quantize's COPY).
    pub file_type: Option<FileType>,
    /// Quantize weights that are already quantized (each round loses accuracy).
    pub allow_requantize: bool,
    /// Every weight in the file type's base type: no mix.
    pub pure: bool,
    /// Write the output in parts, as llama-gguf-split does.
    pub split: SplitOutput,
}

/// Where the output is cut into parts (`OUT-00001-of-0000N.gguf`); a part ends before the
/// tensor that would take it past either limit (a tensor larger than the size limit gets a
/// part of its own). Neither limit: one file.
#[derive(Clone, Copy, Debug, Default)]
pub struct SplitOutput {
    /// Most bytes of tensor data in a part.
    pub max_bytes: Option<u64>,
    /// Most tensors in a part.
    pub max_tensors: Option<usize>,
}

impl SplitOutput {
    /// Consecutive runs of `plans`, one per part: tensor index ranges, never empty but for a
    /// model without tensors.
    pub fn parts(&self, plans: &[TensorPlan], alignment: u64) -> Vec<std::ops::Range<usize>> {
        let mut parts = Vec::new();
        let (mut start, mut bytes) = (0, 0u64);
        for (i, p) in plans.iter().enumerate() {
            let size = p.out_bytes().next_multiple_of(alignment.max(1));
            let full = self.max_tensors.is_some_and(|n| i - start >= n.max(1))
                || self.max_bytes.is_some_and(|max| bytes + size > max);
            if full && i > start {
                parts.push(start..i);
                (start, bytes) = (i, 0);
            }
            bytes += size;
        }
        parts.push(start..plans.len());
        parts
    }
}

/// One tensor's conversion.
#[derive(Clone, Debug)]
pub struct TensorPlan {
    pub name: String,
    pub dims: Vec<u64>,
    pub from: GgmlType,
    pub to: GgmlType,
}

impl TensorPlan {
    /// Bytes the tensor takes in the output.
    pub fn out_bytes(&self) -> u64 {
        let rows: u64 = self.dims[1..].iter().product();
        self.to.row_bytes(self.dims[0]).unwrap_or(0) * rows
    }
}

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct Summary {
    pub tensors: usize,
    /// Tensors converted (the rest were copied as they were).
    pub converted: usize,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub seconds: f64,
    /// The files written: the output, or its parts.
    pub parts: Vec<PathBuf>,
}

/// `OUT`, or for `count` parts `OUT-00001-of-0000N.gguf`... (`OUT` without its `.gguf`).
fn part_paths(output: &Path, count: usize) -> Vec<PathBuf> {
    if count == 1 {
        return vec![output.to_path_buf()];
    }
    let out = output.to_string_lossy();
    let prefix = out.strip_suffix(".gguf").unwrap_or(&out);
    (1..=count)
        .map(|i| PathBuf::from(format!("{prefix}-{i:05}-of-{count:05}.gguf")))
        .collect()
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Writes the tensors `range` of `plans` (converted from `file`) with `metadata` to `path`;
/// the bytes written.
fn write_part(
    file: &GgufFile,
    plans: &[TensorPlan],
    range: std::ops::Range<usize>,
    metadata: &[(String, Value)],
    path: &Path,
    on_tensor: &mut impl FnMut(usize, &TensorPlan),
) -> Result<u64, QuantizeFileError> {
    let header = GgufHeader {
        alignment: file.alignment(),
        metadata,
        tensors: plans[range.clone()]
            .iter()
            .map(|p| (p.name.as_str(), p.dims.as_slice(), p.to, p.out_bytes()))
            .collect(),
    };
    let (head, offsets) = header.to_bytes();
    let io = |e| QuantizeFileError::Io(path.to_path_buf(), e);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    out.write_all(&head).map_err(io)?;
    let mut written = 0u64;
    for (i, off) in range.zip(offsets) {
        let (t, p) = (&file.tensors()[i], &plans[i]);
        on_tensor(i, p);
        let data = convert(file, t, p)?;
        out.write_all(&vec![0u8; (off - written) as usize])
            .map_err(io)?;
        out.write_all(&data).map_err(io)?;
        written = off + data.len() as u64;
    }
    out.into_inner()
        .map_err(|e| io(e.into_error()))?
        .sync_all()
        .map_err(io)?;
    Ok(head.len() as u64 + written)
}

#[derive(Debug)]
pub enum QuantizeFileError {
    Open(GgufError),
    Io(PathBuf, std::io::Error),
    /// Input and output are the same file.
    SameFile(PathBuf),
    /// The split limits would make more parts than a split model may have.
    TooManyParts(usize),
    /// A tensor is quantized already and the options do not allow quantizing it again.
    Requantize {
        tensor: String,
        from: GgmlType,
    },
    /// Kolibri cannot read a tensor's type.
    Unreadable {
        tensor: String,
        ty: GgmlType,
    },
    /// A tensor holds NaN or infinity.
    NonFinite {
        tensor: String,
    },
    /// A tensor's data does not match its table entry (a damaged file).
    Damaged {
        tensor: String,
        why: String,
    },
}

impl fmt::Display for QuantizeFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use QuantizeFileError as E;
        match self {
            E::Open(e) => write!(f, "cannot read the input: {e}"),
            E::Io(p, e) => write!(f, "{}: {e}", p.display()),
            E::SameFile(p) => write!(f, "{} is both input and output", p.display()),
            E::TooManyParts(n) => write!(
                f,
                "the split limits make {n} parts, over the {} a split model may have",
                u16::MAX
            ),
            E::Requantize { tensor, from } => write!(
                f,
                "{tensor} is already {from}; quantizing it again loses accuracy \
                 (pass --allow-requantize to do it anyway)"
            ),
            E::Unreadable { tensor, ty } => write!(f, "{tensor}: cannot read type {ty}"),
            E::NonFinite { tensor } => write!(f, "{tensor} holds NaN or infinite values"),
            E::Damaged { tensor, why } => write!(f, "{tensor}: {why}"),
        }
    }
}

impl std::error::Error for QuantizeFileError {}

/// Whether a tensor is a weight matrix the mixes quantize (norms, routers, position tables
/// and other small or sensitive tensors stay as they are).
fn is_weight_matrix(t: &TensorInfo) -> bool {
    const KEPT: [&str; 7] = [
        "_norm",
        "ffn_gate_inp",
        "pos_embd",
        "token_types",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "rope_freqs",
    ];
    t.dims.len() >= 2 && t.name.ends_with(".weight") && !KEPT.iter().any(|k| t.name.contains(k))
}

/// The layer of `blk.N.*`.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// The conversion of every tensor of `file`, checked against `opts`.
pub fn plan(file: &GgufFile, opts: &Options) -> Result<Vec<TensorPlan>, QuantizeFileError> {
    let arch = file.get_str("general.architecture").unwrap_or("llama");
    let meta = |k: &str| file.get_u64(&format!("{arch}.{k}"));
    let n_layers = meta("block_count").unwrap_or(0) as usize;
    let heads = meta("attention.head_count").unwrap_or(1).max(1);
    let gqa = (heads / meta("attention.head_count_kv").unwrap_or(heads).max(1)) as usize;
    let tied = file.tensor("output.weight").is_none();
    let mut plans = Vec::new();
    for t in file.tensors() {
        let to = if !is_weight_matrix(t) {
            t.ggml_type
        } else {
            let role = Role::of(&t.name, tied);
            // The layer in the name, as llama-quantize now counts (it visits tensors in
            // natural name order; files from older versions counted in file order, which in
            // a file sorted by name puts blk.10 before blk.2).
            let layer = layer_of(&t.name).unwrap_or(0);
            let place = Place {
                role,
                layer,
                n_layers,
                gqa,
                experts: t.dims.get(2).is_some_and(|&e| e > 1),
            };
            match opts.file_type {
                None => t.ggml_type,
                Some(ft) if opts.pure => fit_row(ft.base(), t.dims[0]),
                Some(ft) => fit_row(weight_type(ft, &place), t.dims[0]),
            }
        };
        if to != t.ggml_type {
            if is_quantized(t.ggml_type) && !opts.allow_requantize {
                return Err(QuantizeFileError::Requantize {
                    tensor: t.name.clone(),
                    from: t.ggml_type,
                });
            }
            if !can_dequantize(t.ggml_type) {
                return Err(QuantizeFileError::Unreadable {
                    tensor: t.name.clone(),
                    ty: t.ggml_type,
                });
            }
            debug_assert!(can_quantize(to));
        }
        plans.push(TensorPlan {
            name: t.name.clone(),
            dims: t.dims.clone(),
            from: t.ggml_type,
            to,
        });
    }
    Ok(plans)
}

/// The metadata of the output: the input's, with the new file type (if any), without the
/// input's split keys (the output's parts get their own).
fn out_metadata(file: &GgufFile, ft: Option<FileType>) -> Vec<(String, Value)> {
    let replaced = |k: &str| {
        k.starts_with("split.")
            || ft.is_some() && (k == "general.file_type" || k == "general.quantization_version")
    };
    let mut meta: Vec<(String, Value)> = file
        .metadata()
        .iter()
        .filter(|(k, _)| !replaced(k))
        .cloned()
        .collect();
    if let Some(ft) = ft {
        meta.push(("general.quantization_version".into(), Value::U32(2)));
        meta.push(("general.file_type".into(), Value::U32(ft.id())));
    }
    meta
}

/// The metadata of part `no` of `count` holding `tensors` in all: the first part has the
/// model's, every part the split keys (and the alignment, which its data follows).
fn part_metadata(
    model: &[(String, Value)],
    no: usize,
    count: usize,
    tensors: usize,
) -> Vec<(String, Value)> {
    let mut meta: Vec<(String, Value)> = if no == 0 {
        model.to_vec()
    } else {
        let alignment = model.iter().find(|(k, _)| k == "general.alignment");
        alignment.cloned().into_iter().collect()
    };
    if count > 1 {
        meta.push(("split.no".into(), Value::U16(no as u16)));
        meta.push(("split.count".into(), Value::U16(count as u16)));
        meta.push(("split.tensors.count".into(), Value::I32(tensors as i32)));
    }
    meta
}

/// Rows converted per parallel task.
const ROWS_PER_TASK: usize = 16;

/// Tensor `t` converted as `p` says.
fn convert(file: &GgufFile, t: &TensorInfo, p: &TensorPlan) -> Result<Vec<u8>, QuantizeFileError> {
    let src = file.tensor_data(t);
    if p.from == p.to {
        return Ok(src.to_vec());
    }
    let damaged = |why: String| QuantizeFileError::Damaged {
        tensor: t.name.clone(),
        why,
    };
    let row_len = t.dims[0] as usize;
    let rows = t.n_rows() as usize;
    let in_row = p.from.row_bytes(t.dims[0]).unwrap_or(0) as usize;
    let out_row = p.to.row_bytes(t.dims[0]).unwrap_or(0) as usize;
    if in_row * rows != src.len() || out_row == 0 {
        return Err(damaged(format!("{} bytes for {rows} rows", src.len())));
    }
    let mut out = vec![0u8; out_row * rows];
    out.par_chunks_mut(out_row * ROWS_PER_TASK)
        .zip(src.par_chunks(in_row * ROWS_PER_TASK))
        .try_for_each(|(dst, src)| {
            let mut x = vec![0f32; row_len];
            for (d, s) in dst.chunks_exact_mut(out_row).zip(src.chunks_exact(in_row)) {
                dequantize_row(p.from, s, &mut x).map_err(|e| damaged(e.to_string()))?;
                if !x.iter().all(|v| v.is_finite()) {
                    return Err(QuantizeFileError::NonFinite {
                        tensor: t.name.clone(),
                    });
                }
                quantize_row(p.to, &x, d).map_err(|e| damaged(e.to_string()))?;
            }
            Ok(())
        })?;
    Ok(out)
}

/// Quantizes `input` (a file, or any part of a split model) into `output` as `opts` says,
/// calling `on_tensor(i, plan)` as each tensor starts; in parts named after `output` if
/// `opts.split` says so. Writes every file with a `.partial` suffix and renames them when all
/// are done; on any error the partial files are removed and nothing is written.
pub fn quantize_file(
    input: &Path,
    output: &Path,
    opts: &Options,
    mut on_tensor: impl FnMut(usize, &TensorPlan),
) -> Result<Summary, QuantizeFileError> {
    let start = Instant::now();
    let file = GgufFile::open(input).map_err(QuantizeFileError::Open)?;
    let plans = plan(&file, opts)?;
    let ranges = opts.split.parts(&plans, file.alignment());
    if ranges.len() > u16::MAX as usize {
        return Err(QuantizeFileError::TooManyParts(ranges.len()));
    }
    let outputs = part_paths(output, ranges.len());
    let inputs = file.parts().iter().filter_map(|p| p.path.as_deref());
    for (i, o) in inputs.flat_map(|i| outputs.iter().map(move |o| (i, o))) {
        if same_file(i, o) {
            return Err(QuantizeFileError::SameFile(o.clone()));
        }
    }
    let metadata = out_metadata(&file, opts.file_type);
    let partials: Vec<PathBuf> = outputs
        .iter()
        .map(|o| {
            let mut p = o.as_os_str().to_owned();
            p.push(".partial");
            PathBuf::from(p)
        })
        .collect();
    let mut out_bytes = 0;
    for (no, (range, partial)) in ranges.iter().zip(&partials).enumerate() {
        let meta = part_metadata(&metadata, no, ranges.len(), plans.len());
        let written = write_part(&file, &plans, range.clone(), &meta, partial, &mut on_tensor);
        match written {
            Ok(n) => out_bytes += n,
            Err(e) => {
                for p in &partials[..=no] {
                    let _ = std::fs::remove_file(p);
                }
                return Err(e);
            }
        }
    }
    for (partial, o) in partials.iter().zip(&outputs) {
        std::fs::rename(partial, o).map_err(|e| QuantizeFileError::Io(o.clone(), e))?;
    }
    Ok(Summary {
        tensors: plans.len(),
        converted: plans.iter().filter(|p| p.from != p.to).count(),
        in_bytes: file.size_on_disk(),
        out_bytes,
        parts: outputs,
        seconds: start.elapsed().as_secs_f64(),
    })
}
