//! A chat template is code from the model file: any template and any conversation either
//! render or fail with an error, never a panic, a hang or unbounded memory (the renderer's fuel
//! and recursion limits).
#![no_main]

use kolibri::chat::{ChatMessage, ChatTemplate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The template, then the messages' texts, separated by NULs.
    let mut parts = text.split('\0');
    let source = parts.next().unwrap_or_default();
    let Ok(template) = ChatTemplate::new(source, "<s>", "</s>") else {
        return;
    };
    let roles = ["system", "user", "assistant", "tool"];
    let texts: Vec<&str> = parts.take(8).collect();
    let messages: Vec<ChatMessage> = texts
        .iter()
        .enumerate()
        .map(|(i, content)| ChatMessage {
            role: roles[i % roles.len()],
            content,
        })
        .collect();
    let _ = template.render(&messages, true);
});
