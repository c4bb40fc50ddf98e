//! Saved state (`llama_state_*`) over Kolibri's per-sequence state format, which names its
//! model, checks its layout and checksums its data.
//!
//! A whole context is `KLLSTATE`, a version (u32), then per sequence its byte length (u64)
//! and its Kolibri sequence state; sequence 0 carries the last output's logits. Files add the
//! caller's tokens in front: `KLLSFILE`/`KLLSSEQF`, a version, the token count (u32) and
//! the tokens (i32 each), then the state.

use crate::context::llama_context;
use crate::guard::{c_str, guard, handle_mut, slice};
use crate::log;
use crate::types::{llama_seq_id, llama_state_seq_flags, llama_token};
use std::ffi::c_char;
use std::io::Cursor;

const CONTEXT_MAGIC: &[u8; 8] = b"KLLSTATE";
const FILE_MAGIC: &[u8; 8] = b"KLLSFILE";
const SEQ_FILE_MAGIC: &[u8; 8] = b"KLLSSEQF";
const VERSION: u32 = 1;

fn last_logits(ctx: &llama_context) -> Vec<f32> {
    let n_vocab = ctx.n_vocab();
    match ctx.logits.len() {
        0 => Vec::new(),
        n => ctx.logits[n - n_vocab..].to_vec(),
    }
}

fn save_seq(ctx: &llama_context, seq: usize, logits: &[f32]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    ctx.engine()?
        .save_seq(seq, logits, &mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

fn save_context(ctx: &llama_context) -> Result<Vec<u8>, String> {
    let mut out = CONTEXT_MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    let logits = last_logits(ctx);
    for seq in 0..ctx.n_seq() {
        let blob = save_seq(ctx, seq, if seq == 0 { &logits } else { &[] })?;
        out.extend_from_slice(&(blob.len() as u64).to_le_bytes());
        out.extend_from_slice(&blob);
    }
    Ok(out)
}

/// Reads `n` bytes at `*at`, or says what is missing.
fn take<'a>(data: &'a [u8], at: &mut usize, n: usize, what: &str) -> Result<&'a [u8], String> {
    let end = at.checked_add(n).filter(|&e| e <= data.len());
    let Some(end) = end else {
        return Err(format!("state ends inside {what}"));
    };
    let bytes = &data[*at..end];
    *at = end;
    Ok(bytes)
}

fn check_magic(data: &[u8], at: &mut usize, magic: &[u8; 8]) -> Result<(), String> {
    if take(data, at, 8, "the magic")? != magic {
        return Err("not a Kolibri libllama state".into());
    }
    let version = u32::from_le_bytes(take(data, at, 4, "the version")?.try_into().expect("4"));
    if version != VERSION {
        return Err(format!(
            "state version {version}, this library reads {VERSION}"
        ));
    }
    Ok(())
}

/// Restores a whole context from `data`; returns the bytes read.
fn load_context(ctx: &mut llama_context, data: &[u8]) -> Result<usize, String> {
    let mut at = 0;
    check_magic(data, &mut at, CONTEXT_MAGIC)?;
    // The container is read whole first; each sequence is then checked before it is loaded.
    let mut blobs = Vec::new();
    for seq in 0..ctx.n_seq() {
        let len = u64::from_le_bytes(take(data, &mut at, 8, "a length")?.try_into().expect("8"));
        let len = usize::try_from(len).map_err(|_| "a sequence length overflows".to_string())?;
        blobs.push((seq, take(data, &mut at, len, "a sequence")?));
    }
    for (seq, blob) in blobs {
        let logits = ctx
            .kv()
            .load_seq(seq, &mut Cursor::new(blob))
            .map_err(|e| format!("sequence {seq}: {e}"))?;
        if seq == 0 {
            ctx.logits = logits;
        }
    }
    ctx.hole = None;
    Ok(at)
}

fn seq_index(ctx: &llama_context, seq: llama_seq_id) -> Result<usize, String> {
    usize::try_from(seq)
        .ok()
        .filter(|&s| s < ctx.n_seq())
        .ok_or_else(|| format!("sequence {seq} is not in 0..{}", ctx.n_seq()))
}

/// Runs `f` on the context, logging its error as `name`'s and returning `failure` then.
unsafe fn with_ctx<T>(
    name: &'static str,
    ctx: *mut llama_context,
    failure: T,
    f: impl FnOnce(&mut llama_context) -> Result<T, String>,
) -> T
where
    T: Copy,
{
    // SAFETY: the caller passes NULL or a live context.
    let Some(c) = (unsafe { handle_mut(name, ctx) }) else {
        return failure;
    };
    guard(name, failure, || match f(c) {
        Ok(v) => v,
        Err(e) => {
            log::error(&format!("{name}: {e}"));
            failure
        }
    })
}

/// Copies `bytes` to `dst` if `size` holds them.
unsafe fn copy_out(bytes: &[u8], dst: *mut u8, size: usize) -> Result<usize, String> {
    if dst.is_null() || size < bytes.len() {
        return Err(format!(
            "the state takes {} bytes, the buffer holds {size}",
            bytes.len()
        ));
    }
    // SAFETY: `dst` holds `size` >= len bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
    Ok(bytes.len())
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_state_get_size(ctx: *mut llama_context) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctx("llama_state_get_size", ctx, 0, |c| {
            Ok(save_context(c)?.len())
        })
    }
}

/// # Safety
/// `ctx` is NULL or a live context; `dst` writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_state_get_data(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctx("llama_state_get_data", ctx, 0, |c| {
            copy_out(&save_context(c)?, dst, size)
        })
    }
}

/// # Safety
/// `ctx` is NULL or a live context; `src` readable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_state_set_data(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let data = unsafe { slice(src, size) };
    // SAFETY: as above.
    unsafe { with_ctx("llama_state_set_data", ctx, 0, |c| load_context(c, data)) }
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_get_state_size(ctx: *mut llama_context) -> usize {
    // SAFETY: the same contract.
    unsafe { llama_state_get_size(ctx) }
}

/// The legacy form without a size: `dst` must hold `llama_state_get_size` bytes.
///
/// # Safety
/// `ctx` is NULL or a live context; `dst` holds `llama_state_get_size(ctx)` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_copy_state_data(ctx: *mut llama_context, dst: *mut u8) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctx("llama_copy_state_data", ctx, 0, |c| {
            let bytes = save_context(c)?;
            copy_out(&bytes, dst, bytes.len())
        })
    }
}

/// The legacy form without a size: the state's own lengths bound the read.
///
/// # Safety
/// `ctx` is NULL or a live context; `src` holds a whole state from `llama_copy_state_data`.
#[no_mangle]
pub unsafe extern "C" fn llama_set_state_data(ctx: *mut llama_context, src: *const u8) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctx("llama_set_state_data", ctx, 0, |c| {
            let size = state_extent(src, c.n_seq())?;
            load_context(c, slice(src, size))
        })
    }
}

/// The length of the state at `src`, read from its own headers.
unsafe fn state_extent(src: *const u8, n_seq: usize) -> Result<usize, String> {
    // SAFETY: the caller's contract: a whole state is readable at `src`.
    let head = unsafe { slice(src, 12) };
    let mut at = 0;
    check_magic(head, &mut at, CONTEXT_MAGIC)?;
    for _ in 0..n_seq {
        // SAFETY: as above; each length is followed by its sequence.
        let len = unsafe { slice(src.add(at), 8) };
        let len = u64::from_le_bytes(len.try_into().expect("8")) as usize;
        at = at
            .checked_add(8 + len)
            .ok_or("a sequence length overflows")?;
    }
    Ok(at)
}

fn tokens_prefix(magic: &[u8; 8], tokens: &[llama_token]) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(tokens.len() as u32).to_le_bytes());
    for t in tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out
}

/// Writes `bytes` to `path` through a temporary file, so a failed write leaves no torn file.
fn write_file(path: &str, bytes: &[u8]) -> Result<(), String> {
    let tmp = format!("{path}.partial");
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("{path}: {e}"))
}

/// Reads a file written by [`write_file`]: its tokens into `tokens_out` and the rest.
unsafe fn read_tokens_file(
    path: &str,
    magic: &[u8; 8],
    tokens_out: *mut llama_token,
    capacity: usize,
    n_out: *mut usize,
) -> Result<(Vec<u8>, usize), String> {
    let data = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let mut at = 0;
    check_magic(&data, &mut at, magic).map_err(|e| format!("{path}: {e}"))?;
    let n = u32::from_le_bytes(
        take(&data, &mut at, 4, "the token count")?
            .try_into()
            .expect("4"),
    );
    let n = n as usize;
    if n > capacity || (tokens_out.is_null() && n > 0) {
        return Err(format!("{path} holds {n} tokens, the buffer {capacity}"));
    }
    let raw = take(&data, &mut at, n * 4, "the tokens")?;
    for (i, t) in raw.chunks_exact(4).enumerate() {
        // SAFETY: `tokens_out` holds `capacity` >= n tokens.
        unsafe { *tokens_out.add(i) = i32::from_le_bytes(t.try_into().expect("4")) };
    }
    // SAFETY: NULL or writable, by the caller's contract.
    if let Some(out) = unsafe { n_out.as_mut() } {
        *out = n;
    }
    Ok((data, at))
}

/// # Safety
/// `ctx` is NULL or a live context; `path` a C string; `tokens` readable for `n` ids.
#[no_mangle]
pub unsafe extern "C" fn llama_state_save_file(
    ctx: *mut llama_context,
    path: *const c_char,
    tokens: *const llama_token,
    n: usize,
) -> bool {
    // SAFETY: the caller's contract.
    let (path, tokens) = unsafe { (c_str(path), slice(tokens, n)) };
    // SAFETY: as above.
    unsafe {
        with_ctx("llama_state_save_file", ctx, false, |c| {
            let path = path.ok_or("NULL path")?;
            let mut bytes = tokens_prefix(FILE_MAGIC, tokens);
            bytes.extend_from_slice(&save_context(c)?);
            write_file(&path, &bytes).map(|()| true)
        })
    }
}

/// # Safety
/// `ctx` is NULL or a live context; `path` a C string; `tokens_out` writable for `capacity`
/// ids; `n_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn llama_state_load_file(
    ctx: *mut llama_context,
    path: *const c_char,
    tokens_out: *mut llama_token,
    capacity: usize,
    n_out: *mut usize,
) -> bool {
    // SAFETY: the caller's contract.
    let path = unsafe { c_str(path) };
    // SAFETY: as above.
    unsafe {
        with_ctx("llama_state_load_file", ctx, false, |c| {
            let path = path.ok_or("NULL path")?;
            let (data, at) = read_tokens_file(&path, FILE_MAGIC, tokens_out, capacity, n_out)?;
            load_context(c, &data[at..]).map(|_| true)
        })
    }
}

/// # Safety
/// As [`llama_state_save_file`].
#[no_mangle]
pub unsafe extern "C" fn llama_save_session_file(
    ctx: *mut llama_context,
    path: *const c_char,
    tokens: *const llama_token,
    n: usize,
) -> bool {
    // SAFETY: the same contract.
    unsafe { llama_state_save_file(ctx, path, tokens, n) }
}

/// # Safety
/// As [`llama_state_load_file`].
#[no_mangle]
pub unsafe extern "C" fn llama_load_session_file(
    ctx: *mut llama_context,
    path: *const c_char,
    tokens_out: *mut llama_token,
    capacity: usize,
    n_out: *mut usize,
) -> bool {
    // SAFETY: the same contract.
    unsafe { llama_state_load_file(ctx, path, tokens_out, capacity, n_out) }
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_size(
    ctx: *mut llama_context,
    seq: llama_seq_id,
) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctx("llama_state_seq_get_size", ctx, 0, |c| {
            let s = seq_index(c, seq)?;
            Ok(save_seq(c, s, &[])?.len())
        })
    }
}

/// # Safety
/// `ctx` is NULL or a live context; `dst` writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_data(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
    seq: llama_seq_id,
) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctx("llama_state_seq_get_data", ctx, 0, |c| {
            let s = seq_index(c, seq)?;
            copy_out(&save_seq(c, s, &[])?, dst, size)
        })
    }
}

/// # Safety
/// `ctx` is NULL or a live context; `src` readable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_set_data(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
    dest: llama_seq_id,
) -> usize {
    // SAFETY: the caller's contract.
    let data = unsafe { slice(src, size) };
    // SAFETY: as above.
    unsafe {
        with_ctx("llama_state_seq_set_data", ctx, 0, |c| {
            let s = seq_index(c, dest)?;
            c.kv()
                .load_seq(s, &mut Cursor::new(data))
                .map_err(|e| e.to_string())?;
            Ok(data.len())
        })
    }
}

/// # Safety
/// `ctx` is NULL or a live context; `path` a C string; `tokens` readable for `n` ids.
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_save_file(
    ctx: *mut llama_context,
    path: *const c_char,
    seq: llama_seq_id,
    tokens: *const llama_token,
    n: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let (path, tokens) = unsafe { (c_str(path), slice(tokens, n)) };
    // SAFETY: as above.
    unsafe {
        with_ctx("llama_state_seq_save_file", ctx, 0, |c| {
            let path = path.ok_or("NULL path")?;
            let s = seq_index(c, seq)?;
            let mut bytes = tokens_prefix(SEQ_FILE_MAGIC, tokens);
            bytes.extend_from_slice(&save_seq(c, s, &[])?);
            write_file(&path, &bytes).map(|()| bytes.len())
        })
    }
}

/// # Safety
/// `ctx` is NULL or a live context; `path` a C string; `tokens_out` writable for `capacity`
/// ids; `n_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_load_file(
    ctx: *mut llama_context,
    path: *const c_char,
    dest: llama_seq_id,
    tokens_out: *mut llama_token,
    capacity: usize,
    n_out: *mut usize,
) -> usize {
    // SAFETY: the caller's contract.
    let path = unsafe { c_str(path) };
    // SAFETY: as above.
    unsafe {
        with_ctx("llama_state_seq_load_file", ctx, 0, |c| {
            let path = path.ok_or("NULL path")?;
            let s = seq_index(c, dest)?;
            let (data, at) = read_tokens_file(&path, SEQ_FILE_MAGIC, tokens_out, capacity, n_out)?;
            c.kv()
                .load_seq(s, &mut Cursor::new(&data[at..]))
                .map_err(|e| e.to_string())?;
            Ok(data.len())
        })
    }
}

/// # Safety
/// As [`llama_state_seq_get_size`]; the flags select nothing here (one cache kind).
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_size_ext(
    ctx: *mut llama_context,
    seq: llama_seq_id,
    _flags: llama_state_seq_flags,
) -> usize {
    // SAFETY: the same contract.
    unsafe { llama_state_seq_get_size(ctx, seq) }
}

/// # Safety
/// As [`llama_state_seq_get_data`].
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_data_ext(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
    seq: llama_seq_id,
    _flags: llama_state_seq_flags,
) -> usize {
    // SAFETY: the same contract.
    unsafe { llama_state_seq_get_data(ctx, dst, size, seq) }
}

/// # Safety
/// As [`llama_state_seq_set_data`].
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_set_data_ext(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
    dest: llama_seq_id,
    _flags: llama_state_seq_flags,
) -> usize {
    // SAFETY: the same contract.
    unsafe { llama_state_seq_set_data(ctx, src, size, dest) }
}
