//! The memory (KV cache) API. `llama_memory_t` is the context itself behind llama.h's opaque
//! pointer. Kolibri's sequences are contiguous from position 0, so removing a range from the
//! middle is accepted only as the first half of a context shift: the `llama_memory_seq_add`
//! that moves the rest down must follow before the next decode (llama.cpp's tools do exactly
//! this).

use crate::context::llama_context;
use crate::guard::{guard, handle_mut};
use crate::log;
use crate::types::{llama_pos, llama_seq_id};

/// Positions `p0..p1` of `seq`, removed but not yet closed.
pub struct Hole {
    pub seq: usize,
    pub p0: usize,
    pub p1: usize,
}

pub type llama_memory_t = *mut llama_context;

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_get_memory(ctx: *const llama_context) -> llama_memory_t {
    ctx.cast_mut()
}

/// Sequences `seq` names: all of them for a negative id, none for one out of range.
fn seqs(ctx: &llama_context, seq: llama_seq_id) -> Vec<usize> {
    let n = ctx.n_seq();
    match usize::try_from(seq) {
        Err(_) => (0..n).collect(),
        Ok(s) if s < n => vec![s],
        Ok(_) => {
            log::error(&format!("llama_memory: sequence {seq} is not in 0..{n}"));
            Vec::new()
        }
    }
}

/// `p0..p1` as llama.h reads it: a negative start is 0, a negative end is "to the end".
fn range(p0: llama_pos, p1: llama_pos, len: usize) -> (usize, usize) {
    let start = usize::try_from(p0).unwrap_or(0).min(len);
    let end = usize::try_from(p1).map_or(len, |e| e.min(len));
    (start, end.max(start))
}

unsafe fn with_memory<T>(
    name: &'static str,
    mem: llama_memory_t,
    failure: T,
    f: impl FnOnce(&mut llama_context) -> T,
) -> T {
    // SAFETY: the caller passes NULL or a live context.
    match unsafe { handle_mut(name, mem) } {
        Some(c) => guard(name, failure, || f(c)),
        None => failure,
    }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_clear(mem: llama_memory_t, _data: bool) {
    // SAFETY: the caller's contract.
    unsafe {
        with_memory("llama_memory_clear", mem, (), |c| {
            for s in 0..c.n_seq() {
                c.kv().truncate_seq(s, 0);
            }
            c.hole = None;
        })
    }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_rm(
    mem: llama_memory_t,
    seq: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        with_memory("llama_memory_seq_rm", mem, false, |c| {
            let targets = seqs(c, seq);
            if targets.is_empty() {
                return false;
            }
            for s in targets.iter().copied() {
                let len = c.seq_len(s);
                let (start, end) = range(p0, p1, len);
                if start == end {
                    continue;
                }
                if end == len {
                    let kept = c.kv().truncate_seq(s, start);
                    if kept != start {
                        // A recurrent state older than its rewind snapshots: as llama.cpp's
                        // recurrent memory, refuse; the sequence holds `kept` tokens now.
                        log::error(&format!(
                            "llama_memory_seq_rm: the recurrent state at position {start} is gone; the sequence keeps {kept} tokens"
                        ));
                        return false;
                    }
                } else if targets.len() == 1 && c.hole.is_none() {
                    c.hole = Some(Hole {
                        seq: s,
                        p0: start,
                        p1: end,
                    });
                } else {
                    log::error("llama_memory_seq_rm: a range inside a sequence can only be removed as part of a context shift");
                    return false;
                }
            }
            true
        })
    }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_cp(
    mem: llama_memory_t,
    src: llama_seq_id,
    dst: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
) {
    // SAFETY: the caller's contract.
    unsafe {
        with_memory("llama_memory_seq_cp", mem, (), |c| {
            let n = c.n_seq();
            let (Some(s), Some(d)) = (
                usize::try_from(src).ok().filter(|&s| s < n),
                usize::try_from(dst).ok().filter(|&d| d < n),
            ) else {
                log::error(&format!(
                    "llama_memory_seq_cp: sequences {src} -> {dst} not in 0..{n}"
                ));
                return;
            };
            let len = c.seq_len(s);
            if range(p0, p1, len) != (0, len) {
                log::error("llama_memory_seq_cp: only a whole sequence can be copied");
                return;
            }
            c.kv().copy_seq(s, d);
        })
    }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_keep(mem: llama_memory_t, seq: llama_seq_id) {
    // SAFETY: the caller's contract.
    unsafe {
        with_memory("llama_memory_seq_keep", mem, (), |c| {
            for s in 0..c.n_seq() {
                if s as llama_seq_id != seq {
                    c.kv().truncate_seq(s, 0);
                }
            }
        })
    }
}

/// Moves positions `p0..p1` of `seq` by `delta`. Supported: closing a removed range (the
/// rest moves down by the range's length), and a zero move.
///
/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_add(
    mem: llama_memory_t,
    seq: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
    delta: llama_pos,
) {
    // SAFETY: the caller's contract.
    unsafe {
        with_memory("llama_memory_seq_add", mem, (), |c| {
            if delta == 0 {
                return;
            }
            let closes = c.hole.as_ref().is_some_and(|h| {
                let len = c.seq_len(h.seq);
                h.seq as llama_seq_id == seq
                    && range(p0, p1, len) == (h.p1, len)
                    && delta as i64 == h.p0 as i64 - h.p1 as i64
            });
            if !closes {
                log::error(
                    "llama_memory_seq_add: only the shift that closes a removed range is supported",
                );
                return;
            }
            let hole = c.hole.take().expect("checked above");
            if let Err(e) = c.kv().shift_seq(hole.seq, hole.p0, hole.p1 - hole.p0) {
                log::error(&format!("llama_memory_seq_add: {e}"));
            }
        })
    }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_div(
    _mem: llama_memory_t,
    _seq: llama_seq_id,
    _p0: llama_pos,
    _p1: llama_pos,
    _d: i32,
) {
    log::once(
        "llama_memory_seq_div",
        "dividing positions (self-extend) is not supported",
    );
}

unsafe fn seq_extent(mem: llama_memory_t, seq: llama_seq_id, last: bool) -> llama_pos {
    // SAFETY: the caller's contract.
    unsafe {
        with_memory("llama_memory_seq_pos", mem, -1, |c| {
            let Some(s) = usize::try_from(seq).ok().filter(|&s| s < c.n_seq()) else {
                return -1;
            };
            match c.seq_len(s) {
                0 => -1,
                n if last => n as llama_pos - 1,
                _ => 0,
            }
        })
    }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_pos_min(
    mem: llama_memory_t,
    seq: llama_seq_id,
) -> llama_pos {
    // SAFETY: the caller's contract.
    unsafe { seq_extent(mem, seq, false) }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_pos_max(
    mem: llama_memory_t,
    seq: llama_seq_id,
) -> llama_pos {
    // SAFETY: the caller's contract.
    unsafe { seq_extent(mem, seq, true) }
}

/// # Safety
/// `mem` is NULL or a live context's memory.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_can_shift(mem: llama_memory_t) -> bool {
    !mem.is_null()
}
