//! Saved state: one sequence's tokens, KV cache rows and (optionally) last logits, written to a
//! stream or file and loaded back into the same sequence of another context, in this process or
//! another, so a long prompt is evaluated once.
//!
//! The format (little-endian), version [`VERSION`]:
//! - `KLBSTATE`, the version (u32), the model's fingerprint (u64: its metadata and tensor
//!   index, see [`Model::fingerprint`]), its name (u32 length + UTF-8);
//! - the cache layout (10 × u32: attention layers, KV heads of all layers, key and value
//!   values per position summed over the layers' heads, key and value types, their largest
//!   Hadamard blocks, a checksum of the key centers and balances, the floats of a sequence's
//!   recurrent state), the token, logit and checkpoint counts (u32
//!   each), then a checksum (u64) of the header so far: a changed count reads as corrupt,
//!   not as a truncated file;
//! - the tokens (u32 each), the logits (f32 each);
//! - the cache rows as stored: per (layer, KV head) the keys of every position, then likewise
//!   the values, then (quantized keys) per (layer, KV head) the f16 keys of the positions of
//!   the last, incomplete group (see `kv_cache::recent`);
//! - the recurrent layers' state after the last token (f32 each; none for transformers), then
//!   each checkpoint: its position (u32) and state, so a request that shares only a prefix
//!   resumes from it;
//! - a checksum (u64, [`Checksum`]) of everything before it.
//!
//! Loading checks all of it (format, length, checksum, model, layout, sizes) before it touches
//! the context, so a file that does not fit leaves the context as it was.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::Context;
use crate::model::checksum::{checksum, Checksum};
use crate::model::kv_cache::group_start;
use crate::model::{KvType, Model, ModelError};
use crate::tokenizer::TokenId;

const MAGIC: &[u8; 8] = b"KLBSTATE";
/// Bumped whenever the layout above changes; other versions are refused, not guessed at.
const VERSION: u32 = 6;
/// Longest model name a state file may carry (a guard against a corrupt length).
const MAX_NAME: usize = 4096;

/// The part of a state file before the cache rows.
struct Header {
    fingerprint: u64,
    name: String,
    layout: [u32; 10],
    tokens: Vec<TokenId>,
    logits: Vec<f32>,
    /// Recurrent-state checkpoints after the body's state.
    n_checkpoints: u32,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&self.fingerprint.to_le_bytes());
        b.extend_from_slice(&(self.name.len() as u32).to_le_bytes());
        b.extend_from_slice(self.name.as_bytes());
        for x in self.layout {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b.extend_from_slice(&(self.tokens.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.logits.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.n_checkpoints.to_le_bytes());
        let fixed_sum = checksum(&b);
        b.extend_from_slice(&fixed_sum.to_le_bytes());
        for t in &self.tokens {
            b.extend_from_slice(&t.to_le_bytes());
        }
        for l in &self.logits {
            b.extend_from_slice(&l.to_le_bytes());
        }
        b
    }

    /// Reads a header; `len` is the stream's length, which bounds every count read.
    fn read(r: &mut impl Read, len: u64) -> Result<(Header, u64), ModelError> {
        let mut seen = Recording {
            inner: r,
            bytes: Vec::new(),
        };
        let r = &mut seen;
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic)
            .map_err(|_| bad("truncated: too short to be a Kolibri state file"))?;
        if &magic != MAGIC {
            return Err(bad("not a Kolibri state file (no KLBSTATE magic)"));
        }
        let version = read_u32(r)?;
        if version != VERSION {
            return Err(bad(format!(
                "format version {version}; this Kolibri reads version {VERSION}"
            )));
        }
        let fingerprint = read_u64(r)?;
        let name_len = read_u32(r)? as usize;
        if name_len > MAX_NAME {
            return Err(corrupt());
        }
        let mut name = vec![0u8; name_len];
        r.read_exact(&mut name).map_err(|_| truncated())?;
        let name = String::from_utf8(name).map_err(|_| corrupt())?;
        let mut layout = [0u32; 10];
        for x in &mut layout {
            *x = read_u32(r)?;
        }
        let (n_tokens, n_logits) = (read_u32(r)? as u64, read_u32(r)? as u64);
        let n_checkpoints = read_u32(r)?;
        let fixed_sum = checksum(&seen.bytes);
        let r = seen.inner;
        if read_u64(r)? != fixed_sum {
            return Err(bad(
                "corrupted (its header's checksum does not match the header)",
            ));
        }
        let fixed = seen.bytes.len() as u64 + 8;
        let size = fixed + 4 * (n_tokens + n_logits);
        if size > len {
            return Err(truncated());
        }
        let mut words = vec![0u8; 4 * (n_tokens + n_logits) as usize];
        r.read_exact(&mut words).map_err(|_| truncated())?;
        let mut words = words.chunks_exact(4).map(|w| [w[0], w[1], w[2], w[3]]);
        let tokens = words
            .by_ref()
            .take(n_tokens as usize)
            .map(u32::from_le_bytes)
            .collect();
        let logits = words.map(f32::from_le_bytes).collect();
        let header = Header {
            fingerprint,
            name,
            layout,
            tokens,
            logits,
            n_checkpoints,
        };
        Ok((header, size))
    }

    /// Bytes of cache rows and recurrent state the header's layout and token count imply
    /// (`None`: a layout no cache has).
    fn rows_bytes(&self) -> Option<u64> {
        // The key and value widths are summed over every layer's heads: a row's bytes are
        // linear in its values (whole blocks per head).
        let [_, _, width_k, width_v, ty_k, ty_v, .., recurrent] = self.layout.map(u64::from);
        let row = |ty: u64, width: u64| {
            let ty = KvType::from_code(i32::try_from(ty).ok()?)?;
            let width = usize::try_from(width).ok()?;
            width
                .is_multiple_of(ty.block_len())
                .then(|| ty.row_bytes(width) as u64)
        };
        let position = row(ty_k, width_k)? + row(ty_v, width_v)?;
        let n = self.tokens.len();
        // Quantized keys: the last group's keys in f16 too.
        let recent = if ty_k == KvType::F16 as u64 {
            0
        } else {
            let rows = (n - group_start(n)) as u64;
            (rows * 2).checked_mul(width_k)?
        };
        // The state, then each checkpoint's position and state.
        let checkpoints = (4 + 4 * recurrent).checked_mul(u64::from(self.n_checkpoints))?;
        position
            .checked_mul(n as u64)?
            .checked_add(recent)?
            .checked_add(4 * recurrent)?
            .checked_add(checkpoints)
    }
}

impl Context {
    /// Writes sequence `seq`'s state (its tokens, its cache rows as stored, and `logits`: the
    /// last position's logits, or empty) to `out`; returns the bytes written.
    pub fn save_seq(
        &self,
        seq: usize,
        logits: &[f32],
        out: &mut impl Write,
    ) -> Result<u64, ModelError> {
        self.check_seq(seq)?;
        let n_vocab = self.model.hparams.n_vocab;
        if !logits.is_empty() && logits.len() != n_vocab {
            return Err(ModelError::InvalidArgument(format!(
                "{} logits to save; the model's vocabulary has {n_vocab}",
                logits.len()
            )));
        }
        let header = self.header(seq, logits);
        let mut w = Summing {
            inner: out,
            sum: Checksum::new(),
            n: 0,
        };
        w.put(&header.encode())?;
        for run in self.kv.seq_bytes(seq, header.tokens.len()) {
            w.put(run)?;
        }
        for x in self.recurrent.seq_state(seq) {
            w.put(&x.to_le_bytes())?;
        }
        for (held, state) in self.recurrent.seq_checkpoints(seq) {
            w.put(&(held as u32).to_le_bytes())?;
            for x in state {
                w.put(&x.to_le_bytes())?;
            }
        }
        let sum = w.sum.finish();
        w.put(&sum.to_le_bytes())?;
        w.inner.flush().map_err(write_err)?;
        Ok(w.n)
    }

    /// Bytes [`Context::save_seq`] writes for sequence `seq` with `n_logits` logits.
    pub fn seq_state_size(&self, seq: usize, n_logits: usize) -> Result<u64, ModelError> {
        self.check_seq(seq)?;
        let header = self.header(seq, &vec![0.0; n_logits]);
        let rows: usize = self
            .kv
            .seq_bytes(seq, header.tokens.len())
            .map(<[u8]>::len)
            .sum();
        let recurrent = 4 * self.recurrent.state_len();
        let checkpoints = self.recurrent.seq_checkpoints(seq).count() * (4 + recurrent);
        Ok((header.encode().len() + rows + recurrent + checkpoints + 8) as u64)
    }

    fn header(&self, seq: usize, logits: &[f32]) -> Header {
        Header {
            fingerprint: self.model.fingerprint(),
            name: self
                .model
                .display_name()
                .chars()
                .take(MAX_NAME / 4)
                .collect(),
            layout: self.layout(),
            tokens: self.tokens[seq].clone(),
            logits: logits.to_vec(),
            n_checkpoints: self.recurrent.seq_checkpoints(seq).count() as u32,
        }
    }

    /// Loads a state written by [`Context::save_seq`] into sequence `seq`, replacing what it
    /// held; returns the saved logits (empty if none were saved). Any mismatch (format,
    /// length, checksum, model, cache layout, a sequence longer than this context) is an
    /// error and leaves the context as it was. Only a read failing halfway through copying
    /// the rows (the stream changed under us) empties the sequence, and says so.
    pub fn load_seq<R: Read + Seek>(
        &mut self,
        seq: usize,
        input: &mut R,
    ) -> Result<Vec<f32>, ModelError> {
        self.check_seq(seq)?;
        let len = input.seek(SeekFrom::End(0)).map_err(read_err)?;
        input.rewind().map_err(read_err)?;
        let (header, header_len) = Header::read(input, len)?;
        let rows = header.rows_bytes().ok_or_else(corrupt)?;
        let want = header_len
            .checked_add(rows)
            .and_then(|n| n.checked_add(8))
            .ok_or_else(corrupt)?;
        if len != want {
            return Err(bad(format!(
                "{len} bytes, but its header describes {want}: {}",
                if len < want {
                    "truncated"
                } else {
                    "trailing bytes"
                }
            )));
        }
        input.rewind().map_err(read_err)?;
        let saved_sum = checksum_of(input, len - 8)?;
        if saved_sum != read_u64(input)? {
            return Err(bad("corrupted (its checksum does not match its data)"));
        }
        self.check_fits(&header)?;
        input.seek(SeekFrom::Start(header_len)).map_err(read_err)?;
        let n = header.tokens.len();
        let len = self.recurrent.state_len();
        let mut state = vec![0u8; 4 * len * (1 + header.n_checkpoints as usize)];
        let mut held = vec![[0u8; 4]; header.n_checkpoints as usize];
        let copied = (self.kv.fill_seq(seq, n, |run| input.read_exact(run)))
            .and_then(|()| input.read_exact(&mut state[..4 * len]))
            .and_then(|()| {
                let rest = state[4 * len..].chunks_exact_mut(4 * len.max(1));
                for (h, s) in held.iter_mut().zip(rest) {
                    input.read_exact(h)?;
                    input.read_exact(s)?;
                }
                Ok(())
            });
        if let Err(e) = copied {
            self.truncate_seq(seq, 0);
            return Err(bad(format!(
                "reading the cache rows failed ({e}); the sequence is now empty"
            )));
        }
        let state: Vec<f32> = (state.chunks_exact(4))
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        self.recurrent.set_seq_state(seq, n, &state[..len]);
        for (h, s) in held.iter().zip(state[len..].chunks_exact(len.max(1))) {
            let h = u32::from_le_bytes(*h) as usize;
            // A checkpoint past the saved tokens is not one of them (a corrupt count).
            if h <= n {
                self.recurrent.add_checkpoint(seq, h, s);
            }
        }
        self.tokens[seq] = header.tokens;
        Ok(header.logits)
    }

    /// [`Context::save_seq`] to a file, written beside it and renamed into place, so a
    /// failure never leaves a partial file where a good one was.
    pub fn save_seq_file(
        &self,
        seq: usize,
        logits: &[f32],
        path: &Path,
    ) -> Result<u64, ModelError> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = std::path::PathBuf::from(tmp);
        let written = (|| {
            let file = std::fs::File::create(&tmp).map_err(|e| io_at("create", &tmp, e))?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let n = self.save_seq(seq, logits, &mut out)?;
            let file = out
                .into_inner()
                .map_err(|e| io_at("write", &tmp, e.into_error()))?;
            file.sync_all().map_err(|e| io_at("write", &tmp, e))?;
            std::fs::rename(&tmp, path).map_err(|e| io_at("rename into", path, e))?;
            Ok(n)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// [`Context::load_seq`] from a file.
    pub fn load_seq_file(&mut self, seq: usize, path: &Path) -> Result<Vec<f32>, ModelError> {
        let file = std::fs::File::open(path).map_err(|e| io_at("open", path, e))?;
        let mut input = std::io::BufReader::with_capacity(1 << 20, file);
        self.load_seq(seq, &mut input).map_err(|e| match e {
            ModelError::BadState(s) => ModelError::BadState(format!("{}: {s}", path.display())),
            other => other,
        })
    }

    /// The cache layout a state must match: the cache's, and how its keys are balanced and
    /// centered.
    fn layout(&self) -> [u32; 10] {
        let [a, b, c, d, e, f, g, h] = self.kv.layout();
        let recurrent = self.recurrent.state_len() as u32;
        [a, b, c, d, e, f, g, h, self.key_basis_checksum(), recurrent]
    }

    fn check_seq(&self, seq: usize) -> Result<(), ModelError> {
        if seq >= self.tokens.len() {
            return Err(ModelError::InvalidArgument(format!(
                "sequence {seq} is not in 0..{}",
                self.tokens.len()
            )));
        }
        Ok(())
    }

    /// Whether a checksummed header fits this context: same model, same cache layout, no
    /// more tokens than positions, tokens and logits of this vocabulary.
    fn check_fits(&self, h: &Header) -> Result<(), ModelError> {
        let model: &Model = &self.model;
        let ours = model.fingerprint();
        if h.fingerprint != ours {
            return Err(bad(format!(
                "saved from model {:?} (fingerprint {:016x}); this context runs {:?} ({ours:016x})",
                h.name,
                h.fingerprint,
                model.display_name()
            )));
        }
        let layout = self.layout();
        if h.layout != layout {
            return Err(bad(format!(
                "saved from a cache of {}; this context's cache is {}",
                describe(h.layout),
                describe(layout)
            )));
        }
        let n_ctx = self.kv.n_ctx;
        if h.tokens.len() > n_ctx {
            return Err(bad(format!(
                "holds {} tokens; this context holds at most {n_ctx}",
                h.tokens.len()
            )));
        }
        let n_vocab = model.hparams.n_vocab;
        if h.tokens.iter().any(|&t| t as usize >= n_vocab)
            || !(h.logits.is_empty() || h.logits.len() == n_vocab)
        {
            return Err(corrupt());
        }
        Ok(())
    }
}

/// A writer that counts and checksums what passes through.
struct Summing<'a, W: Write> {
    inner: &'a mut W,
    sum: Checksum,
    n: u64,
}

impl<W: Write> Summing<'_, W> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        self.inner.write_all(bytes).map_err(write_err)?;
        self.sum.update(bytes);
        self.n += bytes.len() as u64;
        Ok(())
    }
}

/// A reader that keeps what passes through (the header, to check its checksum).
struct Recording<'a, R: Read> {
    inner: &'a mut R,
    bytes: Vec<u8>,
}

impl<R: Read> Read for Recording<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

/// The checksum of the next `n` bytes of `r`.
fn checksum_of(r: &mut impl Read, mut n: u64) -> Result<u64, ModelError> {
    let mut sum = Checksum::new();
    let mut buf = vec![0u8; 1 << 20];
    while n > 0 {
        let take = n.min(buf.len() as u64) as usize;
        r.read_exact(&mut buf[..take]).map_err(|_| truncated())?;
        sum.update(&buf[..take]);
        n -= take as u64;
    }
    Ok(sum.finish())
}

/// A layout in words, for messages.
fn describe(l: [u32; 10]) -> String {
    let ty = |code: u32| {
        i32::try_from(code)
            .ok()
            .and_then(KvType::from_code)
            .map_or_else(|| format!("type {code}"), |t| t.name().to_owned())
    };
    format!(
        "{} layers with {} KV heads in all, keys {} of {} values a position, values {} of {}, \
         recurrent state {} floats",
        l[0],
        l[1],
        ty(l[4]),
        l[2],
        ty(l[5]),
        l[3],
        l[9]
    )
}

fn read_u32(r: &mut impl Read) -> Result<u32, ModelError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).map_err(|_| truncated())?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> Result<u64, ModelError> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b).map_err(|_| truncated())?;
    Ok(u64::from_le_bytes(b))
}

fn bad(s: impl Into<String>) -> ModelError {
    ModelError::BadState(s.into())
}

fn truncated() -> ModelError {
    bad("truncated (the file ends inside its header or data)")
}

fn corrupt() -> ModelError {
    bad("corrupted (its header holds impossible sizes)")
}

fn read_err(e: std::io::Error) -> ModelError {
    ModelError::Io(format!("reading saved state: {e}"))
}

fn write_err(e: std::io::Error) -> ModelError {
    ModelError::Io(format!("writing saved state: {e}"))
}

fn io_at(what: &str, path: &Path, e: std::io::Error) -> ModelError {
    ModelError::Io(format!("cannot {what} {}: {e}", path.display()))
}
