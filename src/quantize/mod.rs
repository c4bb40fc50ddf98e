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
    pub file_type: FileType,
    /// Quantize weights that are already quantized (each round loses accuracy).
    pub allow_requantize: bool,
    /// Every weight in the file type's base type: no mix.
    pub pure: bool,
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
}

#[derive(Debug)]
pub enum QuantizeFileError {
    Open(GgufError),
    Io(PathBuf, std::io::Error),
    /// Input and output are the same file.
    SameFile(PathBuf),
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
            let ty = if opts.pure {
                opts.file_type.base()
            } else {
                weight_type(opts.file_type, &place)
            };
            fit_row(ty, t.dims[0])
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

/// The metadata of the output: the input's, with the new file type.
fn out_metadata(file: &GgufFile, ft: FileType) -> Vec<(String, Value)> {
    let mut meta: Vec<(String, Value)> = file
        .metadata()
        .iter()
        .filter(|(k, _)| k != "general.file_type" && k != "general.quantization_version")
        .cloned()
        .collect();
    meta.push(("general.quantization_version".into(), Value::U32(2)));
    meta.push(("general.file_type".into(), Value::U32(ft.id())));
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

/// Quantizes `input` into `output` as `opts` says, calling `on_tensor(i, plan)` as each
/// tensor starts. Writes `output` with a `.partial` suffix and renames it when done; on any
/// error the partial file is removed and `output` is untouched.
pub fn quantize_file(
    input: &Path,
    output: &Path,
    opts: &Options,
    mut on_tensor: impl FnMut(usize, &TensorPlan),
) -> Result<Summary, QuantizeFileError> {
    let start = Instant::now();
    let same = match (input.canonicalize(), output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Err(QuantizeFileError::SameFile(output.to_path_buf()));
    }
    let file = GgufFile::open(input).map_err(QuantizeFileError::Open)?;
    let plans = plan(&file, opts)?;
    let metadata = out_metadata(&file, opts.file_type);
    let header = GgufHeader {
        alignment: file.alignment(),
        metadata: &metadata,
        tensors: plans
            .iter()
            .map(|p| (p.name.as_str(), p.dims.as_slice(), p.to, p.out_bytes()))
            .collect(),
    };
    let (head, offsets) = header.to_bytes();
    let mut partial = output.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let io = |e| QuantizeFileError::Io(partial.clone(), e);
    let result = (|| {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&partial).map_err(io)?);
        out.write_all(&head).map_err(io)?;
        let mut written = 0u64;
        for (i, (t, p)) in file.tensors().iter().zip(&plans).enumerate() {
            on_tensor(i, p);
            let data = convert(&file, t, p)?;
            let pad = offsets[i] - written;
            out.write_all(&vec![0u8; pad as usize]).map_err(io)?;
            out.write_all(&data).map_err(io)?;
            written = offsets[i] + data.len() as u64;
        }
        out.into_inner()
            .map_err(|e| io(e.into_error()))?
            .sync_all()
            .map_err(io)?;
        Ok::<u64, QuantizeFileError>(head.len() as u64 + written)
    })();
    let out_bytes = match result {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, output).map_err(|e| QuantizeFileError::Io(output.into(), e))?;
    Ok(Summary {
        tensors: plans.len(),
        converted: plans.iter().filter(|p| p.from != p.to).count(),
        in_bytes: file.file_bytes().len() as u64,
        out_bytes,
        seconds: start.elapsed().as_secs_f64(),
    })
}
