//! Chat templates: a conversation rendered into the prompt text the model was trained on.

use std::ffi::c_char;

use super::guard::{c_str, guard, handle, slice, write_text};
use super::model::kolibri_model;
use super::status::*;
use crate::chat::{ChatMessage, ChatTemplate};

/// One message of a conversation. This struct is frozen: it will never gain fields (a later
/// message kind would get its own struct and function).
#[repr(C)]
pub struct kolibri_chat_message {
    /// "system", "user", "assistant", "tool", ... (NUL-terminated UTF-8).
    pub role: *const c_char,
    /// The message text (NUL-terminated UTF-8).
    pub content: *const c_char,
}

/// Renders `messages` through a Jinja chat template, as Hugging Face's apply_chat_template
/// does. `template_source` NULL uses the model's own template (`tokenizer.chat_template`);
/// otherwise it is Jinja source to use instead. With `add_generation_prompt` the text ends
/// where the assistant's reply begins. Tokenize the result with `parse_special` true.
///
/// **Ownership:** writes into the caller's `buf` (text plus NUL); `*len` receives the length
/// without the NUL. Nothing is kept from `messages` after the call.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `len`, NULL `messages` with `n_messages > 0`,
/// a NULL or non-UTF-8 role/content), NOT_FOUND (`template_source` NULL and the model has no
/// template), TEMPLATE_ERROR (the template does not parse, or fails or refuses to render these
/// messages; the message says why), BUFFER_TOO_SMALL (only `*len` written).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `template_source` is NULL or NUL-terminated; `messages` is NULL or
/// readable for `n_messages` entries whose strings are NUL-terminated; `buf` is NULL or
/// writable for `capacity` bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_chat_apply_template(
    model: *const kolibri_model,
    template_source: *const c_char,
    messages: *const kolibri_chat_message,
    n_messages: usize,
    add_generation_prompt: bool,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        // SAFETY: per this function's contract.
        let raw = unsafe { slice(messages, n_messages, "messages") }?;
        let mut conversation = Vec::with_capacity(raw.len());
        for (i, msg) in raw.iter().enumerate() {
            conversation.push(ChatMessage {
                // SAFETY: per this function's contract.
                role: unsafe { c_str(msg.role, &format!("messages[{i}].role")) }?,
                // SAFETY: per this function's contract.
                content: unsafe { c_str(msg.content, &format!("messages[{i}].content")) }?,
            });
        }
        let text = if template_source.is_null() {
            m.chat_template()?
                .render(&conversation, add_generation_prompt)
        } else {
            // SAFETY: per this function's contract.
            let source = unsafe { c_str(template_source, "template_source") }?;
            ChatTemplate::with_model_tokens(source, &m.model)
                .and_then(|t| t.render(&conversation, add_generation_prompt))
        }
        .map_err(Failure::from)?;
        // SAFETY: per this function's contract.
        unsafe { write_text(text.as_bytes(), buf, capacity, len) }
    })
}
