//! A reasoning model's reply is model output: any text, split anywhere while it streams, is
//! split into thinking, answer and calls without a panic, the same way as the whole reply,
//! and a reply without markup is all answer, unchanged.
#![no_main]

use kolibri::chat::reasoning::{split_whole, Joined, ReasoningSplitter, ReasoningSyntax};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let syntax = match mode % 3 {
        0 => ReasoningSyntax::tags("<think>", "</think>"),
        1 => ReasoningSyntax::tags("<|channel>thought", "<channel|>"),
        _ => ReasoningSyntax::Harmony,
    };
    let opened = mode & 4 != 0;
    let tools = (mode & 8 != 0).then(|| vec!["f".to_string()]);
    let text = String::from_utf8_lossy(rest);
    let whole = split_whole(&syntax, opened, tools.clone(), &text);
    // The text without its bytes below 8, streamed in pieces cut at them.
    let cuts = |c: char| (c as u32) < 8;
    let joined_text: String = text.split(cuts).collect();
    let mut splitter = ReasoningSplitter::new(&syntax, opened, tools.clone());
    let mut streamed = Joined::default();
    for piece in text.split(cuts) {
        for part in splitter.push(piece) {
            streamed.add(part);
        }
    }
    for part in splitter.finish() {
        streamed.add(part);
    }
    assert_eq!(
        (streamed.reasoning, streamed.content, streamed.calls),
        split_whole(&syntax, opened, tools, &joined_text),
    );
    if !opened && !text.contains('<') {
        assert_eq!(whole.1, text);
        assert!(whole.0.is_empty() && whole.2.is_empty());
    }
});
