//! `llama_chat_apply_template`. llama.cpp matches a template against a list of known formats;
//! Kolibri runs the Jinja template itself (as transformers does), and keeps names for a few
//! common formats that callers pass instead of a template.

use crate::guard::{c_str, guard, slice, write_c_string};
use crate::log;
use crate::types::llama_chat_message;
use kolibri::chat::{ChatMessage, ChatTemplate};
use std::ffi::{c_char, CStr};

/// Formats callers name instead of passing a template, in Jinja.
const BUILTIN: &[(&CStr, &str)] = &[
    (
        c"chatml",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
         {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    ),
    (
        c"llama3",
        "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n\
         {{ m.content | trim }}<|eot_id|>{% endfor %}\
         {% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
    ),
    (
        c"gemma",
        "{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}\n\
         {{ m.content | trim }}<end_of_turn>\n{% endfor %}\
         {% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
    ),
    (
        c"phi3",
        "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}\
         {% if add_generation_prompt %}<|assistant|>\n{% endif %}",
    ),
    (
        c"zephyr",
        "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|endoftext|>\n{% endfor %}\
         {% if add_generation_prompt %}<|assistant|>\n{% endif %}",
    ),
];

fn render(template: &str, chat: &[llama_chat_message], add_ass: bool) -> Result<String, String> {
    let source = BUILTIN
        .iter()
        .find(|(name, _)| name.to_bytes() == template.as_bytes())
        .map_or(template, |(_, jinja)| jinja);
    let mut texts = Vec::with_capacity(chat.len());
    for (i, m) in chat.iter().enumerate() {
        // SAFETY: llama.h's messages hold C strings.
        let (role, content) = unsafe { (c_str(m.role), c_str(m.content)) };
        let (Some(role), Some(content)) = (role, content) else {
            return Err(format!("message {i} has a NULL role or content"));
        };
        texts.push((role, content));
    }
    let messages: Vec<ChatMessage> = texts
        .iter()
        .map(|(role, content)| ChatMessage { role, content })
        .collect();
    let template = ChatTemplate::new(source, "", "").map_err(|e| e.to_string())?;
    template
        .render(&messages, add_ass)
        .map_err(|e| e.to_string())
}

/// The formatted chat's length in bytes (written to `buf` as far as it fits, with a NUL),
/// or -1 when the template fails.
///
/// # Safety
/// `tmpl` is NULL or a C string; `chat` holds `n_msg` messages; `buf` is NULL or writable for
/// `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_chat_apply_template(
    tmpl: *const c_char,
    chat: *const llama_chat_message,
    n_msg: usize,
    add_ass: bool,
    buf: *mut c_char,
    length: i32,
) -> i32 {
    const F: &str = "llama_chat_apply_template";
    // SAFETY: the caller's contract.
    let (template, chat) = unsafe { (c_str(tmpl), slice(chat, n_msg)) };
    let template = template.unwrap_or(std::borrow::Cow::Borrowed("chatml"));
    guard(F, -1, || match render(&template, chat, add_ass) {
        // SAFETY: the caller's contract on `buf`.
        Ok(text) => unsafe {
            write_c_string(buf, usize::try_from(length).unwrap_or(0), text.as_bytes())
        },
        Err(e) => {
            log::error(&format!("{F}: {e}"));
            -1
        }
    })
}

/// # Safety
/// `output` is NULL or writable for `len` pointers.
#[no_mangle]
pub unsafe extern "C" fn llama_chat_builtin_templates(
    output: *mut *const c_char,
    len: usize,
) -> i32 {
    if !output.is_null() {
        for (i, (name, _)) in BUILTIN.iter().take(len).enumerate() {
            // SAFETY: `output` holds `len` > i pointers.
            unsafe { *output.add(i) = name.as_ptr() };
        }
    }
    BUILTIN.len() as i32
}
