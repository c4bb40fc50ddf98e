//! `llama_batch` allocation, as llama.cpp does it (malloc'd arrays, `seq_id` ended by NULL),
//! so batches from either library free the same way.

use crate::log;
use crate::types::*;
use std::ptr;

fn empty() -> llama_batch {
    llama_batch {
        n_tokens: 0,
        token: ptr::null_mut(),
        embd: ptr::null_mut(),
        pos: ptr::null_mut(),
        n_seq_id: ptr::null_mut(),
        seq_id: ptr::null_mut(),
        logits: ptr::null_mut(),
    }
}

/// A batch over the caller's tokens: sequence 0, positions following the cache, logits for the
/// last token.
#[no_mangle]
pub extern "C" fn llama_batch_get_one(tokens: *mut llama_token, n_tokens: i32) -> llama_batch {
    llama_batch {
        n_tokens,
        token: tokens,
        ..empty()
    }
}

/// `n` elements of `T` from malloc (NULL for n = 0 or when memory runs out).
fn alloc<T>(n: usize) -> *mut T {
    match n.checked_mul(std::mem::size_of::<T>()) {
        // SAFETY: malloc of a checked size; the result is checked by the caller.
        Some(bytes) if bytes > 0 => unsafe { libc::malloc(bytes).cast() },
        _ => ptr::null_mut(),
    }
}

#[no_mangle]
pub extern "C" fn llama_batch_init(n_tokens: i32, embd: i32, n_seq_max: i32) -> llama_batch {
    let (Ok(n), Ok(n_embd), Ok(n_seq)) = (
        usize::try_from(n_tokens),
        usize::try_from(embd),
        usize::try_from(n_seq_max),
    ) else {
        log::error("llama_batch_init: negative size");
        return empty();
    };
    let mut batch = empty();
    if n_embd > 0 {
        batch.embd = alloc(n.saturating_mul(n_embd));
    } else {
        batch.token = alloc(n);
    }
    batch.pos = alloc(n);
    batch.n_seq_id = alloc(n);
    batch.logits = alloc(n);
    batch.seq_id = alloc::<*mut llama_seq_id>(n + 1);
    if !batch.seq_id.is_null() {
        for i in 0..n {
            // SAFETY: seq_id holds n + 1 pointers.
            unsafe { *batch.seq_id.add(i) = alloc(n_seq.max(1)) };
        }
        // SAFETY: as above; the NULL ends the list for llama_batch_free.
        unsafe { *batch.seq_id.add(n) = ptr::null_mut() };
    }
    batch
}

/// # Safety
/// `batch` came from `llama_batch_init` and is freed once.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_free(batch: llama_batch) {
    // SAFETY: every pointer is NULL or from malloc in llama_batch_init.
    unsafe {
        libc::free(batch.token.cast());
        libc::free(batch.embd.cast());
        libc::free(batch.pos.cast());
        libc::free(batch.n_seq_id.cast());
        if !batch.seq_id.is_null() {
            let mut i = 0;
            while !(*batch.seq_id.add(i)).is_null() {
                libc::free((*batch.seq_id.add(i)).cast());
                i += 1;
            }
            libc::free(batch.seq_id.cast());
        }
        libc::free(batch.logits.cast());
    }
}

/// One entry of an extended batch.
struct ExtToken {
    id: llama_token,
    seqs: Vec<llama_seq_id>,
    pos: Option<llama_pos>,
    output: bool,
}

/// llama.h's extended batch, built entry by entry and run by `llama_process`.
pub struct llama_batch_ext {
    capacity: usize,
    n_seq: usize,
    tokens: Vec<ExtToken>,
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_init(
    ctx: *mut crate::context::llama_context,
) -> *mut llama_batch_ext {
    // SAFETY: the caller's contract.
    let (capacity, n_seq) = unsafe {
        (
            crate::context::llama_n_batch(ctx),
            crate::context::llama_n_seq_max(ctx),
        )
    };
    if ctx.is_null() {
        log::error("llama_batch_ext_init: NULL context");
        return ptr::null_mut();
    }
    Box::into_raw(Box::new(llama_batch_ext {
        capacity: capacity as usize,
        n_seq: n_seq as usize,
        tokens: Vec::new(),
    }))
}

/// # Safety
/// `batch` is NULL or from `llama_batch_ext_init`, freed once.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_free(batch: *mut llama_batch_ext) {
    if !batch.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(batch) });
    }
}

/// # Safety
/// `batch` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_clear(batch: *mut llama_batch_ext) {
    // SAFETY: the caller's contract.
    if let Some(b) = unsafe { batch.as_mut() } {
        b.tokens.clear();
    }
}

/// # Safety
/// `batch` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add(
    batch: *mut llama_batch_ext,
    seq: llama_seq_id,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { llama_batch_ext_add_token(batch, seq, LLAMA_TOKEN_NULL) }
}

/// The new entry's index, or -1 (full), -2 (bad token; NULL is allowed only through
/// `llama_batch_ext_add`), -3 (bad sequence).
///
/// # Safety
/// `batch` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_token(
    batch: *mut llama_batch_ext,
    seq: llama_seq_id,
    id: llama_token,
) -> i32 {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { batch.as_mut() }) else {
        return -1;
    };
    if b.tokens.len() >= b.capacity {
        return -1;
    }
    if id < LLAMA_TOKEN_NULL {
        return -2;
    }
    if usize::try_from(seq).map_or(true, |s| s >= b.n_seq) {
        return -3;
    }
    b.tokens.push(ExtToken {
        id,
        seqs: vec![seq],
        pos: None,
        output: false,
    });
    b.tokens.len() as i32 - 1
}

fn entry<'a>(batch: *mut llama_batch_ext, idx: i32) -> Option<&'a mut ExtToken> {
    // SAFETY: callers pass NULL or a live batch.
    let b = unsafe { batch.as_mut() }?;
    usize::try_from(idx).ok().and_then(|i| b.tokens.get_mut(i))
}

/// # Safety
/// `batch` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_seq(
    batch: *mut llama_batch_ext,
    idx: i32,
    seq: llama_seq_id,
) -> bool {
    entry(batch, idx).map(|t| t.seqs.push(seq)).is_some()
}

/// # Safety
/// `batch` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_output_logits(
    batch: *mut llama_batch_ext,
    idx: i32,
    value: bool,
) -> bool {
    entry(batch, idx).map(|t| t.output = value).is_some()
}

/// llama.h: "for now, this is equivalent to setting the output logits".
///
/// # Safety
/// `batch` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_output_embd(
    batch: *mut llama_batch_ext,
    idx: i32,
    value: bool,
) -> bool {
    // SAFETY: the same contract.
    unsafe { llama_batch_ext_set_output_logits(batch, idx, value) }
}

/// # Safety
/// `batch` is NULL or live; `pos` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_pos(
    batch: *mut llama_batch_ext,
    idx: i32,
    pos: *const llama_pos,
) -> bool {
    // SAFETY: the caller's contract.
    let Some(&p) = (unsafe { pos.as_ref() }) else {
        return false;
    };
    entry(batch, idx).map(|t| t.pos = Some(p)).is_some()
}

/// # Safety
/// Any arguments: embeddings input is not supported.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_embd(
    _batch: *mut llama_batch_ext,
    _seq: llama_seq_id,
    _embd: llama_embd,
) -> i32 {
    log::once(
        "llama_batch_ext_add_embd",
        "embeddings input is not supported",
    );
    -2
}

/// # Safety
/// Any arguments: embeddings input is not supported.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_embd_token(
    _batch: *mut llama_batch_ext,
    _idx: i32,
    _embd: llama_embd,
) -> bool {
    log::once(
        "llama_batch_ext_set_embd_token",
        "embeddings input is not supported",
    );
    false
}

/// # Safety
/// Any arguments: embeddings input is not supported.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_embd_state(
    _batch: *mut llama_batch_ext,
    _idx: i32,
    _embd: llama_embd,
) -> bool {
    log::once(
        "llama_batch_ext_set_embd_state",
        "state embeddings (MTP, deepstack) are not supported",
    );
    false
}

/// Runs an extended batch: the same rules and return codes as `llama_decode`.
///
/// # Safety
/// `ctx` and `batch` are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn llama_process(
    ctx: *mut crate::context::llama_context,
    _kind: i32,
    batch: *mut llama_batch_ext,
) -> i32 {
    // SAFETY: the caller's contract.
    let (Some(c), Some(b)) = (unsafe { ctx.as_mut() }, unsafe { batch.as_mut() }) else {
        log::error("llama_process: NULL context or batch");
        return -1;
    };
    if b.tokens.iter().any(|t| t.id == LLAMA_TOKEN_NULL) {
        log::error("llama_process: an entry has no token (embeddings input is not supported)");
        return -1;
    }
    let mut token: Vec<llama_token> = b.tokens.iter().map(|t| t.id).collect();
    let positions: Option<Vec<llama_pos>> = b.tokens.iter().map(|t| t.pos).collect();
    let mut pos = positions.unwrap_or_default();
    let mut n_seq_id: Vec<i32> = b.tokens.iter().map(|t| t.seqs.len() as i32).collect();
    let mut seq_ptrs: Vec<*mut llama_seq_id> =
        b.tokens.iter_mut().map(|t| t.seqs.as_mut_ptr()).collect();
    let mut logits: Vec<i8> = b.tokens.iter().map(|t| i8::from(t.output)).collect();
    let view = llama_batch {
        n_tokens: token.len() as i32,
        token: token.as_mut_ptr(),
        embd: ptr::null_mut(),
        // Entries without a position continue their sequence.
        pos: if pos.is_empty() {
            ptr::null_mut()
        } else {
            pos.as_mut_ptr()
        },
        n_seq_id: n_seq_id.as_mut_ptr(),
        seq_id: seq_ptrs.as_mut_ptr(),
        logits: logits.as_mut_ptr(),
    };
    crate::guard::guard("llama_process", -1, || crate::context::decode(c, &view))
}
