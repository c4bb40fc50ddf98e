//! A conversation file (`kolibri chat`'s `/load`) is whatever a user points it at: any bytes
//! are read or refused without a panic, and what is read is written back to the same
//! conversation.
#![no_main]

use kolibri::chat::conversation::Conversation;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(conversation) = Conversation::from_json(text) {
        let again = Conversation::from_json(&conversation.to_json()).expect("its own output reads");
        assert_eq!(again, conversation);
    }
});
