//! Repacked weights kept on disk, so a model loads without repacking the second time: the
//! cache file is mapped read-only like the model (its pages shared with the page cache)
//! instead of filling fresh memory, whose page zeroing and copying dominate a cold load.
//!
//! One file per model content, `<dir>/<content key>-<model stem>.kpack`, so that every path to
//! the same model (a link, a copy, the Hugging Face cache's blob and an LM Studio folder's
//! file) shares one, whatever its file name (the stem is the first path's, for people):
//! - a 64-byte header: magic, the layout version (`LAYOUT_VERSION`), the model's identity
//!   (its length, a hash of its first 64 KiB: GGUF metadata and tensor index, and a hash of
//!   [`SAMPLES`] blocks spread over the rest, the last one included; every part of a split
//!   model), the entry count, a checksum of the entries, the file length;
//! - one entry per repacked tensor, in load order: a hash of its name, its type and shape, and
//!   per array its offset, length and checksum;
//! - the arrays, each on a 4 KiB boundary.
//!
//! Anything that does not match (another layout version, a changed model, a truncated or
//! corrupted file) is a miss: the loader repacks and rewrites the file. Writes go to a
//! temporary file renamed into place, so a reader never maps a partial file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::checksum::{checksum, Checksum};
use super::load::release_pages;
use crate::gguf::SplitSet;
use crate::kernels::PackedWeights;
use crate::quant::GgmlType;

/// Bumped whenever a repacked layout (`kernels::packed`, the types' `x8` modules) changes.
const LAYOUT_VERSION: u64 = 2;

const MAGIC: &[u8; 8] = b"KLBRPACK";
const HEADER: usize = 64;
/// Name hash, type, rows, k, array count, then (offset, length, checksum) per array.
const ENTRY: usize = 8 * (5 + 3 * MAX_ARRAYS);
/// Most arrays of a layout (the 32-quant layouts with fifth bits and mins have 4).
const MAX_ARRAYS: usize = 4;
const ALIGN: usize = 4096;
/// Bytes of the model file hashed into its identity.
const FINGERPRINT_BYTES: usize = 64 << 10;
/// Blocks of [`SAMPLE_BYTES`] hashed across the tensor data: a model re-quantized or edited
/// changes them (the GGUF index at the head catches what changes shapes or metadata).
const SAMPLES: usize = 256;
const SAMPLE_BYTES: usize = 4096;

/// One tensor the loader wants repacked.
#[derive(Clone, Copy, Debug)]
pub struct Wanted<'a> {
    pub name: &'a str,
    pub ty: GgmlType,
    pub rows: usize,
    pub k: usize,
}

/// The cache file of one model.
#[derive(Debug)]
pub struct RepackCache {
    path: PathBuf,
    /// The model's identity: its length, the hash of its head, the hash of its samples.
    source: [u64; 3],
}

impl RepackCache {
    /// The cache file in `dir` for the model whose files are `parts` (one, or a split model's
    /// parts) and whose image is `image`; `None` if the image does not hold them.
    pub fn new(dir: &Path, parts: &SplitSet, image: &[u8]) -> Option<RepackCache> {
        let stem = parts.parts()[0]
            .path
            .file_stem()
            .map_or("model".into(), |s| s.to_string_lossy().into_owned());
        let mut head = Checksum::new();
        let mut samples = Checksum::new();
        let mut len = 0u64;
        for part in parts.parts() {
            let bytes = image.get(part.base..part.base + part.len)?;
            len += bytes.len() as u64;
            head.update(&bytes[..bytes.len().min(FINGERPRINT_BYTES)]);
            for block in sample_blocks(bytes) {
                samples.update(block);
            }
        }
        let source = [len, head.finish(), samples.finish()];
        let words: Vec<u8> = source.iter().flat_map(|w| w.to_le_bytes()).collect();
        let key = format!("{:016x}-", checksum(&words));
        let existing = std::fs::read_dir(dir).ok().and_then(|entries| {
            entries.flatten().map(|e| e.path()).find(|p| {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default();
                name.starts_with(&key) && name.ends_with(".kpack")
            })
        });
        let path = existing.unwrap_or_else(|| dir.join(format!("{key}{stem}.kpack")));
        Some(RepackCache { path, source })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cached matrices for `wanted`, in its order, if the file is this model's, was
    /// written for exactly these tensors, and every array checks out. `paged`: the file is not
    /// brought in, and each piece checked leaves memory again (for paged weights, which must
    /// not hold the whole model at any time).
    pub fn load(&self, wanted: &[Wanted], paged: bool) -> Option<Vec<Arc<dyn PackedWeights>>> {
        let file = std::fs::File::open(&self.path).ok()?;
        let map = if paged {
            // SAFETY: read-only mapping of a file only this module writes, always through a
            // rename; every byte is checked below before it is used.
            unsafe { memmap2::Mmap::map(&file) }.ok()?
        } else {
            read_into_huge_pages(file)?
        };
        let map = Arc::new(map);
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(map.get(at..at + 8)?.try_into().ok()?))
        };
        let index_end = HEADER.checked_add(wanted.len().checked_mul(ENTRY)?)?;
        let header_ok = map.get(..8)? == MAGIC
            && word(8)? == LAYOUT_VERSION
            && [word(16)?, word(24)?, word(32)?] == self.source
            && word(40)? == wanted.len() as u64
            && word(56)? == map.len() as u64
            && word(48)? == checksum(map.get(HEADER..index_end)?);
        if !header_ok {
            return None;
        }
        let mut mats = Vec::with_capacity(wanted.len());
        let mut arrays = Vec::new();
        for (i, w) in wanted.iter().enumerate() {
            let e = |f: usize| word(HEADER + i * ENTRY + 8 * f);
            let n_arrays = e(4)? as usize;
            let same = e(0)? == checksum(w.name.as_bytes())
                && e(1)? == w.ty.id() as u64
                && e(2)? == w.rows as u64
                && e(3)? == w.k as u64
                && n_arrays <= MAX_ARRAYS;
            if !same {
                return None;
            }
            let mut offsets = Vec::with_capacity(n_arrays);
            for a in 0..n_arrays {
                let (off, len, sum) = (e(5 + 3 * a)?, e(6 + 3 * a)?, e(7 + 3 * a)?);
                offsets.push(off as usize);
                arrays.push((off as usize, len as usize, sum));
            }
            let m = crate::kernels::from_mapped(w.ty, w.rows, w.k, &map, &offsets)?;
            // The lengths the shape implies must be the lengths recorded (and checksummed).
            let recorded = &arrays[arrays.len() - n_arrays..];
            let lens_match = m
                .arrays()
                .iter()
                .zip(recorded)
                .all(|(a, &(_, len, _))| a.len() == len);
            if !lens_match {
                return None;
            }
            mats.push(m);
        }
        let check = |bytes: &[u8]| match paged {
            false => checksum(bytes),
            true => {
                let mut sum = Checksum::new();
                for piece in bytes.chunks(8 << 20) {
                    sum.update(piece);
                    release_pages(piece);
                }
                sum.finish()
            }
        };
        let intact = arrays.par_iter().all(|&(off, len, sum)| {
            off.checked_add(len)
                .and_then(|end| map.get(off..end))
                .is_some_and(|bytes| check(bytes) == sum)
        });
        intact.then_some(mats)
    }

    /// Writes `mats` (the matrices of `wanted`, in its order) as this model's cache file.
    pub fn store(&self, wanted: &[Wanted], mats: &[&dyn PackedWeights]) -> std::io::Result<()> {
        assert_eq!(wanted.len(), mats.len(), "one matrix per wanted tensor");
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        // Entries and their arrays' places; arrays start on ALIGN boundaries.
        let mut index = Vec::with_capacity(wanted.len() * ENTRY);
        let mut places = Vec::new();
        let mut at = (HEADER + wanted.len() * ENTRY).next_multiple_of(ALIGN);
        for (w, m) in wanted.iter().zip(mats) {
            let arrays = m.arrays();
            assert!(
                arrays.len() <= MAX_ARRAYS,
                "a layout of more than {MAX_ARRAYS} arrays"
            );
            let mut fields = vec![
                checksum(w.name.as_bytes()),
                w.ty.id() as u64,
                w.rows as u64,
                w.k as u64,
                arrays.len() as u64,
            ];
            let sums: Vec<u64> = arrays.par_iter().map(|a| checksum(a)).collect();
            for (bytes, sum) in arrays.iter().zip(&sums) {
                fields.extend([at as u64, bytes.len() as u64, *sum]);
                places.push((at, *bytes));
                at = (at + bytes.len()).next_multiple_of(ALIGN);
            }
            // Unused array slots stay zero.
            fields.resize(5 + 3 * MAX_ARRAYS, 0);
            index.extend(fields.iter().flat_map(|f| f.to_le_bytes()));
        }
        let total = places.last().map_or(at, |(off, b)| off + b.len());
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        for f in [
            LAYOUT_VERSION,
            self.source[0],
            self.source[1],
            self.source[2],
            wanted.len() as u64,
            checksum(&index),
            total as u64,
        ] {
            header.extend_from_slice(&f.to_le_bytes());
        }
        let tmp = self
            .path
            .with_extension(format!("kpack.tmp{}", std::process::id()));
        let written = (|| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
            out.write_all(&header)?;
            out.write_all(&index)?;
            let mut pos = HEADER + index.len();
            for (off, bytes) in places {
                out.write_all(&vec![0u8; off - pos])?;
                out.write_all(bytes)?;
                pos = off + bytes.len();
            }
            // No fsync: it cost a cold 1.5B load 4 s more, and a file torn by a crash fails
            // its length or checksum test and is rewritten.
            out.flush()?;
            drop(out);
            std::fs::rename(&tmp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// [`SAMPLES`] blocks of `bytes` at even steps, the last block included.
fn sample_blocks(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let last = bytes.len().saturating_sub(SAMPLE_BYTES);
    (0..SAMPLES).map(move |i| {
        let at = last * i / (SAMPLES - 1);
        &bytes[at..bytes.len().min(at + SAMPLE_BYTES)]
    })
}

/// The whole file read into anonymous memory advised for transparent huge pages, then made
/// read-only, as a fresh repack's arrays are. A mapping of the file itself has 4 KiB pages,
/// and the kernels streaming every weight for each generated token then miss the TLB every
/// 4 KiB: a fifth of the generation speed. (Processes no longer share the cached pages.)
fn read_into_huge_pages(file: std::fs::File) -> Option<memmap2::Mmap> {
    use std::os::unix::fs::FileExt;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 {
        return None;
    }
    let mut map = memmap2::MmapMut::map_anon(len).ok()?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    // In pieces on every thread: faulting in and filling the pages is most of the time.
    const PIECE: usize = 32 << 20;
    let read = map
        .par_chunks_mut(PIECE)
        .enumerate()
        .all(|(i, piece)| file.read_exact_at(piece, (i * PIECE) as u64).is_ok());
    read.then(|| map.make_read_only().ok()).flatten()
}
