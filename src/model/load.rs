//! Bringing a model file into memory: mapped or read, prefaulted with progress reports,
//! optionally locked in RAM.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::ModelError;
use crate::gguf::{GgufFile, SplitSet};
use crate::kernels;

/// Told the bytes repacked so far during a load; an error (a cancelled load) stops it.
pub(super) type RepackProgress<'a> = &'a mut dyn FnMut(usize) -> Result<(), ModelError>;

/// Bytes brought in between two progress reports (and cancellation checks).
const CHUNK: usize = 32 << 20;

/// How [`super::Model::load_with`] brings the file into memory.
pub struct LoadOptions<'a> {
    /// Map the file (pages shared with the page cache) instead of reading it into private memory.
    pub use_mmap: bool,
    /// Lock the model's pages in RAM (`mlock`) so they are never paged out.
    pub use_mlock: bool,
    /// Called with the fraction loaded, in `[0, 1]`; returning `false` cancels the load.
    pub progress: Option<&'a mut dyn FnMut(f32) -> bool>,
    /// Directory of the repack cache ([`super::repack_cache`]): repacked weights are mapped
    /// from there when a valid copy exists, and written there after a repack otherwise (a
    /// failed write only costs the next load its speed). `None` repacks at every load and
    /// writes nothing.
    pub repack_cache: Option<std::path::PathBuf>,
    /// Paged weights ([`super::paging`]): left in the mapped file, read in place, streamed
    /// per layer by the forward pass. Needs `use_mmap` and not `use_mlock`.
    pub paged: bool,
    /// Load the file's multi-token-prediction block (a drafter; [`Model::mtp_logits`]) and
    /// give contexts a KV cache layer for it. Without it a file's block costs nothing.
    ///
    /// [`Model::mtp_logits`]: super::Context::mtp_logits
    pub mtp: bool,
}

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        LoadOptions {
            use_mmap: true,
            use_mlock: false,
            progress: None,
            repack_cache: None,
            paged: false,
            mtp: false,
        }
    }
}

impl LoadOptions<'_> {
    pub(super) fn report(&mut self, fraction: f32) -> Result<(), ModelError> {
        if let Some(cb) = &mut self.progress {
            if !cb(fraction.clamp(0.0, 1.0)) {
                return Err(ModelError::Cancelled);
            }
        }
        Ok(())
    }
}

/// Opens and parses `paths` as the options say: one file (with every other part, if it is a
/// part of a split model), or the parts of a split model in order, however they are named. With mmap, every page the engine reads in place is brought in before
/// returning (like llama.cpp's `MAP_POPULATE`), so the first token does not pay for page faults
/// and the progress callback sees the real work. Tensors of the types repacked at load are left
/// to the repack, which reads each page once and releases it: faulting them in here too would
/// hold the file and its repacked copy at once.
///
/// Returns the file and how many of its bytes were brought in (progress so far, in bytes),
/// and the parts it was read from.
pub(super) fn open_gguf(
    paths: &[PathBuf],
    opts: &mut LoadOptions,
) -> Result<(GgufFile, usize, SplitSet), ModelError> {
    let Some(path) = paths.first() else {
        return Err(ModelError::InvalidArgument("no model file given".into()));
    };
    opts.report(0.0)?;
    if opts.paged && (!opts.use_mmap || opts.use_mlock) {
        return Err(ModelError::InvalidArgument(
            "paged weights stream from the mapped file: they need it mapped and not locked \
             (--no-mmap and --mlock; use_mmap false or use_mlock true in the C API)"
                .into(),
        ));
    }
    // The named file's header says whether it is one part of several.
    let single = SplitSet::from_paths(vec![path.clone()])?;
    let named = GgufFile::from_split(single.map()?, &single)?;
    let set = match paths {
        [_] => SplitSet::of(path, &named)?,
        _ => SplitSet::from_paths(paths.to_vec())?,
    };
    let len: usize = set.parts().iter().map(|p| p.len).sum();
    if opts.use_mmap {
        let gguf = if set.is_single() {
            named
        } else {
            drop(named);
            GgufFile::from_split(set.map()?, &set)?
        };
        release_header(&gguf);
        if opts.use_mlock {
            lock(gguf.file_bytes()).map_err(|e| io_err(path, LOCK, e))?;
        }
        // Progress counts file bytes (the headers are read); the repack reports the rest.
        let mut done: usize = gguf.parts().iter().map(|p| p.header().len()).sum();
        if opts.paged {
            // Nothing is brought in: the forward pass streams the weights.
            return Ok((gguf, len, set));
        }
        for r in in_place_ranges(&gguf, opts.mtp) {
            for start in r.clone().step_by(CHUNK) {
                let end = (start + CHUNK).min(r.end);
                populate(&gguf.file_bytes()[start..end]);
                done += end - start;
                opts.report(done as f32 / len.max(1) as f32)?;
            }
        }
        return Ok((gguf, done, set));
    }
    drop(named);
    // An anonymous mapping is page-aligned, so block casts of tensor data stay aligned.
    let mut anon = memmap2::MmapMut::map_anon(set.total().max(1))
        .map_err(|e| io_err(path, "allocate memory for", e))?;
    // Huge pages where the system allows them: weights read in place miss the TLB less.
    #[cfg(target_os = "linux")]
    let _ = anon.advise(memmap2::Advice::HugePage);
    let mut done = 0;
    for (i, part) in set.parts().iter().enumerate() {
        let mut file = set.open(i)?;
        for start in (part.base..part.base + part.len).step_by(CHUNK) {
            let end = (start + CHUNK).min(part.base + part.len);
            file.read_exact(&mut anon[start..end])
                .map_err(|e| io_err(&part.path, "read", e))?;
            done += end - start;
            opts.report(done as f32 / len.max(1) as f32)?;
        }
    }
    let map = anon
        .make_read_only()
        .map_err(|e| io_err(path, "protect", e))?;
    if opts.use_mlock {
        lock(&map).map_err(|e| io_err(path, LOCK, e))?;
    }
    // Read in full: the repack's share of the progress is already counted.
    Ok((GgufFile::from_split(map, &set)?, len, set))
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> ModelError {
    ModelError::Io(format!("cannot {what} {}: {e}", path.display()))
}

const LOCK: &str = "lock in memory (mlock; raise RLIMIT_MEMLOCK)";

/// Locks the pages of `bytes`, part of a mapping the model owns; the lock is released with the
/// mapping (munmap) when the model is dropped.
fn lock(bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: locks pages of a live mapping; no memory is read or written.
    if unsafe { libc::mlock(bytes.as_ptr().cast(), bytes.len()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Byte ranges of the data sections read in place: all but the data of tensors whose type is
/// repacked at load (sorted, merged).
fn in_place_ranges(gguf: &GgufFile, mtp: bool) -> Vec<std::ops::Range<usize>> {
    // A multi-token-prediction block not asked for is never read: its pages stay out.
    let unused = if mtp {
        Vec::new()
    } else {
        mtp_block_prefixes(gguf)
    };
    let mut skip: Vec<std::ops::Range<usize>> = gguf
        .tensors()
        .iter()
        .filter(|t| {
            let repacked = t.dims.len() == 2 && kernels::repacks(t.ggml_type);
            repacked || unused.iter().any(|p| t.name.starts_with(p.as_str()))
        })
        .map(|t| {
            let start = gguf.tensor_start(t);
            start..start + t.size as usize
        })
        .collect();
    skip.sort_by_key(|r| r.start);
    let mut ranges = Vec::new();
    for data in gguf.parts().iter().map(|p| p.data()) {
        let mut at = data.start;
        for r in skip.iter().filter(|r| data.contains(&r.start)) {
            if r.start > at {
                ranges.push(at..r.start);
            }
            at = at.max(r.end);
        }
        if at < data.end {
            ranges.push(at..data.end);
        }
    }
    ranges
}

/// The bytes of the file's multi-token-prediction blocks (their tensors, all of them).
pub fn mtp_block_bytes(gguf: &GgufFile) -> u64 {
    let prefixes = mtp_block_prefixes(gguf);
    (gguf.tensors().iter())
        .filter(|t| prefixes.iter().any(|p| t.name.starts_with(p.as_str())))
        .map(|t| t.size)
        .sum()
}

/// `blk.N.` for each multi-token-prediction block the file stores after its trunk (the last
/// `nextn_predict_layers` of `block_count`).
fn mtp_block_prefixes(gguf: &GgufFile) -> Vec<String> {
    let arch = gguf.get_str("general.architecture").unwrap_or_default();
    let count = |key: &str| gguf.get_u64(&format!("{arch}.{key}")).unwrap_or(0);
    let (blocks, mtp) = (count("block_count"), count("nextn_predict_layers"));
    if mtp >= blocks {
        // No trunk (Gemma 4's assistant counts all its layers so): they are what runs.
        return Vec::new();
    }
    (blocks - mtp..blocks)
        .map(|il| format!("blk.{il}."))
        .collect()
}

/// Drops a mapped file's header pages: the metadata and tensor index are parsed into owned
/// values (a 262k-token vocabulary: 6 MB of pages), and what stays in the file (a merge list,
/// scores) is read at load, or a few pages at a time later.
pub(super) fn release_header(gguf: &GgufFile) {
    if gguf.is_mapped() {
        for p in gguf.parts() {
            release_pages(&gguf.file_bytes()[p.header()]);
        }
    }
}

/// Drops the whole pages inside `bytes` from this process's memory (a file mapping re-reads
/// them on access; nothing here reads them again). Failure (locked pages) is harmless.
pub(super) fn release_pages(bytes: &[u8]) {
    let start = bytes.as_ptr() as usize;
    advise_release(start..start + bytes.len());
}

/// Drops the whole pages of the address range `r` (part of a live read-only file mapping)
/// from the process; later reads fault them in again from the page cache or the file.
pub(super) fn advise_release(r: std::ops::Range<usize>) {
    #[cfg(target_os = "linux")]
    {
        let (start, end) = (r.start.next_multiple_of(4096), r.end & !4095);
        if end > start {
            // SAFETY: advisory call on whole pages of a live read-only file mapping the model
            // owns; its contents come back from the file on the next read.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = r;
}

/// Hands the heap memory freed while loading back to the system. The tokenizer and the BPE
/// merge table build on threads of their own, each with its own glibc arena, and their
/// temporary tables (twice the lasting ones) stayed resident beside the model otherwise.
pub(super) fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: no arguments to get wrong; glibc walks its own arenas under their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Faults in the pages of `bytes`: one `madvise(MADV_POPULATE_READ)` where the kernel has it
/// (Linux 5.14+), else a read of one byte per page.
pub(super) fn populate(bytes: &[u8]) {
    #[cfg(target_os = "linux")]
    {
        const MADV_POPULATE_READ: libc::c_int = 22;
        let page = 4096usize;
        let addr = bytes.as_ptr() as usize;
        let aligned = addr & !(page - 1);
        // SAFETY: advisory call on pages of a live read-only mapping; failure is harmless.
        let ok = unsafe {
            libc::madvise(
                aligned as *mut libc::c_void,
                bytes.len() + (addr - aligned),
                MADV_POPULATE_READ,
            )
        } == 0;
        if ok {
            return;
        }
    }
    let mut sum = 0u8;
    for i in (0..bytes.len()).step_by(4096) {
        // SAFETY: in-bounds read; volatile so the touch is not optimised away.
        sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(bytes.as_ptr().add(i)) });
    }
    std::hint::black_box(sum);
}
