//! Split GGUF files (`NAME-00001-of-00003.gguf`, as `llama-gguf-split` writes them and the
//! Hugging Face Hub serves models over 50 GB): every part is a GGUF file of its own; the first
//! holds the model's metadata, each part its share of the tensors, and all say `split.no`,
//! `split.count` and `split.tensors.count`.
//!
//! The parts are laid side by side in one address range, each at a page boundary (a mapping
//! of each file placed there, or the files read into it), so a tensor of any part is a slice
//! of one image, as in a single file, and nothing else in the engine knows about parts.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::error::GgufError;
use super::reader::{GgufFile, Header};

pub const KEY_NO: &str = "split.no";
pub const KEY_COUNT: &str = "split.count";
pub const KEY_TENSORS: &str = "split.tensors.count";

/// Most parts a split model may have (`split.count` is a u16 in llama.cpp).
const MAX_PARTS: u64 = u16::MAX as u64;

/// The files of one model and where each lies in its image.
#[derive(Clone, Debug)]
pub struct SplitSet {
    parts: Vec<PartFile>,
    total: usize,
}

/// One file of a [`SplitSet`].
#[derive(Clone, Debug)]
pub struct PartFile {
    pub path: PathBuf,
    /// Offset of the part in the image (a multiple of the page size).
    pub base: usize,
    /// Length of the file.
    pub len: usize,
}

/// What a part's header says of the split it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SplitKeys {
    /// 0-based.
    pub no: u64,
    pub count: u64,
    pub tensors: Option<u64>,
}

impl SplitKeys {
    /// The keys of a parsed file; `None` for a file that is not a part of several.
    pub(super) fn of(gguf: &GgufFile) -> Option<SplitKeys> {
        Self::from_lookup(|k| gguf.get_u64(k))
    }

    fn from_lookup(get: impl Fn(&str) -> Option<u64>) -> Option<SplitKeys> {
        let count = get(KEY_COUNT).filter(|&c| c > 1)?;
        Some(SplitKeys {
            no: get(KEY_NO).unwrap_or(u64::MAX),
            count,
            tensors: get(KEY_TENSORS),
        })
    }

    fn of_header(h: &Header) -> Option<SplitKeys> {
        Self::from_lookup(|k| h.get(k)?.as_u64())
    }
}

/// Checks that `parts` (parsed, in order; more than one) are the whole of one split model: each says it is its own part of the same count and tensor total, none is
/// another model's (its architecture differs), no tensor is in two, and together they hold
/// the total. `name` names part `i`.
pub(super) fn check_parts(
    parts: &[Header],
    name: &dyn Fn(usize) -> String,
) -> Result<(), GgufError> {
    let count = parts.len() as u64;
    if count == 1 {
        return Ok(());
    }
    let err = |i: usize, why: String| GgufError::Split { part: name(i), why };
    let first = SplitKeys::of_header(&parts[0]).ok_or_else(|| {
        err(
            0,
            format!("it has no {KEY_COUNT} above 1: not the first part of a split model"),
        )
    })?;
    let arch = |h: &Header| {
        h.get("general.architecture")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let model_arch = arch(&parts[0]);
    let mut holder: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, h) in parts.iter().enumerate() {
        let keys = SplitKeys::of_header(h).ok_or_else(|| {
            err(
                i,
                format!("it has no {KEY_COUNT} above 1: not a part of a split model"),
            )
        })?;
        if keys.count != first.count || count != first.count {
            return Err(err(i, format!(
                "it says it is one of {} parts, the first part one of {}: a part of another split model",
                keys.count, first.count
            )));
        }
        if keys.no != i as u64 {
            return Err(err(
                i,
                format!(
                    "it says it is part {}: parts renamed, reordered or copied over one another",
                    keys.no.saturating_add(1)
                ),
            ));
        }
        if keys.tensors != first.tensors {
            return Err(err(i, format!(
                "its {KEY_TENSORS} {:?} differs from the first part's {:?}: a part of another split model",
                keys.tensors, first.tensors
            )));
        }
        if let (Some(a), Some(m)) = (arch(h), &model_arch) {
            if &a != m {
                return Err(err(
                    i,
                    format!("it is a {a} model's part, the first part a {m} model's"),
                ));
            }
        }
        for t in &h.tensors {
            if let Some(j) = holder.insert(&t.name, i) {
                return Err(err(
                    i,
                    format!(
                        "tensor {:?} is in part {} too: a part of another split model",
                        t.name,
                        j + 1
                    ),
                ));
            }
        }
    }
    let held = holder.len() as u64;
    match first.tensors {
        Some(total) if total != held => Err(err(0, format!(
            "the parts hold {held} tensors, {KEY_TENSORS} says {total}: a part of another split model"
        ))),
        _ => Ok(()),
    }
}

impl SplitSet {
    /// The files of the model at `path`, whose own header is `header`: just `path` for a
    /// single file; every part for a part of a split model (whichever part `path` is). Each
    /// part's file must exist; its header is checked when the image is parsed.
    pub fn of(path: &Path, header: &GgufFile) -> Result<SplitSet, GgufError> {
        let Some(keys) = SplitKeys::of(header) else {
            return Self::from_paths(vec![path.to_path_buf()]);
        };
        let whose = || path.display().to_string();
        if keys.count > MAX_PARTS || keys.no >= keys.count {
            return Err(GgufError::Split {
                part: whose(),
                why: format!(
                    "{KEY_NO} {} and {KEY_COUNT} {} do not name a part (0 <= no < count <= {MAX_PARTS})",
                    keys.no as i128, keys.count
                ),
            });
        }
        // The name gives the others' names; if it gives another number than the header, the
        // check of the parts reports which part holds what.
        let text = path.to_str().unwrap_or_default();
        let named = SplitName::parse(text).filter(|n| n.count == keys.count);
        let prefix = named.map(|n| n.prefix).ok_or_else(|| GgufError::Split {
            part: whose(),
            why: format!(
                "it says it is part {} of {}, but its name does not end in {}: the other parts \
                 are found by that name (as llama-gguf-split writes them)",
                keys.no + 1,
                keys.count,
                part_suffix(keys.no, keys.count)
            ),
        })?;
        let paths = (0..keys.count)
            .map(|i| PathBuf::from(format!("{prefix}{}", part_suffix(i, keys.count))))
            .collect();
        Self::from_paths(paths)
    }

    /// The given files as the parts of one model, in order (their lengths read now).
    pub fn from_paths(paths: Vec<PathBuf>) -> Result<SplitSet, GgufError> {
        let page = page_size();
        let count = paths.len();
        let mut total = 0usize;
        let mut parts = Vec::with_capacity(count);
        for (i, path) in paths.into_iter().enumerate() {
            let io = |source| GgufError::Io {
                path: part_name(i, count, &path),
                source,
            };
            let meta = std::fs::metadata(&path).map_err(io)?;
            if meta.is_dir() {
                let why = "a directory, not a GGUF file";
                return Err(io(std::io::Error::new(
                    std::io::ErrorKind::IsADirectory,
                    why,
                )));
            }
            let len = meta.len();
            let len = usize::try_from(len).map_err(|_| GgufError::Split {
                part: part_name(i, count, &path),
                why: "larger than this machine's address space".into(),
            })?;
            let base = total;
            total = len
                .checked_next_multiple_of(page)
                .and_then(|l| base.checked_add(l))
                .ok_or_else(|| GgufError::Split {
                    part: part_name(i, count, &path),
                    why: "the parts together exceed this machine's address space".into(),
                })?;
            parts.push(PartFile { path, base, len });
        }
        Ok(SplitSet { parts, total })
    }

    pub fn parts(&self) -> &[PartFile] {
        &self.parts
    }

    pub fn is_single(&self) -> bool {
        self.parts.len() == 1
    }

    /// Bytes of the image: the parts, each rounded up to whole pages.
    pub fn total(&self) -> usize {
        self.total
    }

    /// "part 2 of 3 (PATH)", or the path of a single file, for messages.
    pub fn name(&self, i: usize) -> String {
        part_name(i, self.parts.len(), &self.parts[i].path)
    }

    /// Opens part `i`, its error naming it.
    pub fn open(&self, i: usize) -> Result<File, GgufError> {
        File::open(&self.parts[i].path).map_err(|source| GgufError::Io {
            path: self.name(i),
            source,
        })
    }

    /// One read-only mapping of every part, each at its base: the files' pages shared with
    /// the page cache as a single file's are.
    pub fn map(&self) -> Result<memmap2::Mmap, GgufError> {
        let files = (0..self.parts.len())
            .map(|i| self.open(i))
            .collect::<Result<Vec<_>, _>>()?;
        if let [file] = files.as_slice() {
            // SAFETY: read-only mapping; a file truncated underneath us by another process
            // would fault, as with every mmap-based loader. We never write through it.
            return unsafe { memmap2::Mmap::map(file) }.map_err(|source| GgufError::Io {
                path: self.name(0),
                source,
            });
        }
        self.stitch(&files)
    }

    #[cfg(unix)]
    fn stitch(&self, files: &[File]) -> Result<memmap2::Mmap, GgufError> {
        use std::os::fd::AsRawFd;
        let io = |i: usize| {
            let name = self.name(i);
            move |source| GgufError::Io { path: name, source }
        };
        // The reservation: anonymous pages, each replaced below by a part's file pages.
        let mut image = memmap2::MmapMut::map_anon(self.total.max(1)).map_err(io(0))?;
        for (i, (part, file)) in self.parts.iter().zip(files).enumerate() {
            if part.len == 0 {
                continue;
            }
            // SAFETY: `base..base + len` lies inside the reservation we own (bases are page
            // multiples, the reservation covers every part rounded up to pages); MAP_FIXED
            // replaces those pages of it and nothing else. The mapping is read-only and lives
            // until the reservation is unmapped as a whole.
            let placed = unsafe {
                libc::mmap(
                    image.as_mut_ptr().add(part.base).cast(),
                    part.len,
                    libc::PROT_READ,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if placed == libc::MAP_FAILED {
                return Err(io(i)(std::io::Error::last_os_error()));
            }
        }
        image.make_read_only().map_err(io(0))
    }

    /// Without `mmap(MAP_FIXED)`: the parts read into private memory.
    #[cfg(not(unix))]
    fn stitch(&self, files: &[File]) -> Result<memmap2::Mmap, GgufError> {
        use std::io::Read;
        let mut image =
            memmap2::MmapMut::map_anon(self.total.max(1)).map_err(|source| GgufError::Io {
                path: self.name(0),
                source,
            })?;
        for (i, (part, mut file)) in self.parts.iter().zip(files).enumerate() {
            file.read_exact(&mut image[part.base..part.base + part.len])
                .map_err(|source| GgufError::Io {
                    path: self.name(i),
                    source,
                })?;
        }
        image.make_read_only().map_err(|source| GgufError::Io {
            path: self.name(0),
            source,
        })
    }
}

/// "-00002-of-00003.gguf" for part index 1 of 3 (llama.cpp's `llama_split_path`).
fn part_suffix(no: u64, count: u64) -> String {
    format!("-{:05}-of-{:05}.gguf", no + 1, count)
}

/// What a split model part's file name says: `PREFIX-0000N-of-0000M.gguf` (as
/// llama-gguf-split writes it; numbers of five digits or more, `.gguf` in any case).
#[derive(Debug, PartialEq, Eq)]
pub struct SplitName<'a> {
    /// Everything before `-0000N-of-0000M.gguf`, folders included.
    pub prefix: &'a str,
    /// 0-based.
    pub no: u64,
    pub count: u64,
}

impl SplitName<'_> {
    /// The parts of a split file name, if it is one.
    pub fn parse(path: &str) -> Option<SplitName<'_>> {
        let stem = path.get(..path.len().checked_sub(5)?)?;
        if !path[stem.len()..].eq_ignore_ascii_case(".gguf") {
            return None;
        }
        let (rest, count) = stem.rsplit_once("-of-")?;
        let (prefix, no) = rest.rsplit_once('-')?;
        let number = |s: &str| {
            (s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        let (no, count) = (number(no)?, number(count)?);
        let well_formed = !prefix.is_empty() && !prefix.ends_with('/') && no >= 1 && no <= count;
        well_formed.then_some(SplitName {
            prefix,
            no: no - 1,
            count,
        })
    }

    /// The name of part `no` (0-based) of this model.
    pub fn part(&self, no: u64) -> String {
        format!("{}{}", self.prefix, part_suffix(no, self.count))
    }
}

fn part_name(i: usize, count: usize, path: &Path) -> String {
    if count == 1 {
        path.display().to_string()
    } else {
        format!("part {} of {count} ({})", i + 1, path.display())
    }
}

pub(super) fn page_size() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            return page as usize;
        }
    }
    4096
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_follow_llama_gguf_split() {
        assert_eq!(part_suffix(0, 3), "-00001-of-00003.gguf");
        let name = SplitName::parse;
        assert_eq!(
            name("/m/Qwen3-8B-Q4_K_M-00002-of-00003.gguf"),
            Some(SplitName {
                prefix: "/m/Qwen3-8B-Q4_K_M",
                no: 1,
                count: 3
            })
        );
        for not_a_part in [
            "/m/model.gguf",
            "/m/x-0002-of-00003.gguf",
            "/m/x-00004-of-00003.gguf",
            "/m/x-00000-of-00003.gguf",
            "/m/-00001-of-00002.gguf",
            "-00001-of-00002.gguf",
            "/m/x-00001-of-00002.bin",
            "/m/x-00001-of-00002.gguf.part",
            "/m/x-0000a-of-00002.gguf",
        ] {
            assert_eq!(name(not_a_part), None, "{not_a_part}");
        }
    }
}
