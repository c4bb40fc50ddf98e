//! Text ⇄ tokens through a model's tokenizer.

use std::ffi::c_char;

use super::guard::{guard, handle, slice, write_array, write_text};
use super::model::kolibri_model;
use super::status::*;

/// Splits UTF-8 text into token ids.
///
/// `text` is `text_len` bytes of UTF-8 (no NUL needed). With `add_special` the model's BOS is
/// prepended when the model asks for one; with `parse_special`, special-token texts such as
/// "<|im_start|>" in `text` become their ids instead of being tokenized as plain text.
///
/// **Ownership:** writes into the caller's `tokens` array; `*n_tokens` receives the count.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `n_tokens`, NULL `text` with `text_len > 0`,
/// `text` not UTF-8, NULL `tokens` with `capacity > 0`), BUFFER_TOO_SMALL (`capacity` below
/// the count; only `*n_tokens` written, so pass NULL/0 first to size the array).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `text` is NULL or readable for `text_len` bytes; `tokens` is NULL
/// or writable for `capacity` ids; `n_tokens` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_tokenize(
    model: *const kolibri_model,
    text: *const c_char,
    text_len: usize,
    add_special: bool,
    parse_special: bool,
    tokens: *mut i32,
    capacity: usize,
    n_tokens: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        // SAFETY: per this function's contract.
        let bytes = unsafe { slice(text.cast::<u8>(), text_len, "text") }?;
        let text = std::str::from_utf8(bytes)
            .map_err(|e| Failure::invalid(format!("text is not valid UTF-8: {e}")))?;
        let ids: Vec<i32> = m
            .model
            .tokenizer
            .encode(text, add_special, parse_special)
            .into_iter()
            .map(|id| id as i32)
            .collect();
        // SAFETY: per this function's contract.
        unsafe { write_array(&ids, tokens, capacity, n_tokens) }
    })
}

/// The bytes one token contributes to text. A piece may be part of a multi-byte UTF-8
/// character (byte tokens), so use `*len`, not strlen, and join pieces before decoding. With
/// `special` false, control tokens (BOS, "<|im_end|>", ...) give the empty string.
///
/// **Ownership:** writes into the caller's `buf` (bytes plus NUL); `*len` receives the byte
/// count without the NUL.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `len`, NULL `buf` with `capacity > 0`),
/// INVALID_TOKEN, BUFFER_TOO_SMALL (only `*len` written).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `buf` is NULL or writable for `capacity` bytes; `len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_token_to_piece(
    model: *const kolibri_model,
    token: i32,
    special: bool,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let id = m.checked_token(token)?;
        let bytes = m.model.tokenizer.token_bytes(id, special);
        // SAFETY: per this function's contract.
        unsafe { write_text(&bytes, buf, capacity, len) }
    })
}

/// Turns token ids back into UTF-8 text (the inverse of kolibri_tokenize for text it
/// produced). Bytes that do not form valid UTF-8 become U+FFFD. With `special` false,
/// control tokens are left out.
///
/// **Ownership:** writes into the caller's `buf` (text plus NUL); `*len` receives the length
/// without the NUL.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `len`, NULL `tokens` with `n_tokens > 0`,
/// NULL `buf` with `capacity > 0`), INVALID_TOKEN (any id out of range), BUFFER_TOO_SMALL
/// (only `*len` written).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `tokens` is NULL or readable for `n_tokens` ids; `buf` is NULL or
/// writable for `capacity` bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_detokenize(
    model: *const kolibri_model,
    tokens: *const i32,
    n_tokens: usize,
    special: bool,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        // SAFETY: per this function's contract.
        let tokens = unsafe { slice(tokens, n_tokens, "tokens") }?;
        let ids = tokens
            .iter()
            .map(|&t| m.checked_token(t))
            .collect::<Result<Vec<u32>, _>>()?;
        // A whole text: the space the encoder prefixed comes off its start, with or without
        // control tokens shown (pieces, kolibri_token_to_piece, keep theirs).
        let bytes = m.model.tokenizer.detokenize(&ids, special, true);
        let text = String::from_utf8_lossy(&bytes);
        // SAFETY: per this function's contract.
        unsafe { write_text(text.as_bytes(), buf, capacity, len) }
    })
}
