//! An assistant drafter (`gemma4-assistant`) loaded from arbitrary GGUF images beside a Gemma 4
//! target ($KOLIBRI_FUZZ_MODEL): an error or an assistant, never a panic.
#![no_main]

use std::sync::OnceLock;

use kolibri::gguf::GgufFile;
use kolibri::model::{Assistant, Model};
use libfuzzer_sys::fuzz_target;

fn target() -> &'static Model {
    static TARGET: OnceLock<Model> = OnceLock::new();
    TARGET.get_or_init(|| {
        let path = std::env::var("KOLIBRI_FUZZ_MODEL").expect("KOLIBRI_FUZZ_MODEL: a Gemma 4 GGUF");
        Model::load(path).expect("the target model loads")
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = GgufFile::from_bytes(data.to_vec()) {
        let _ = Assistant::from_gguf(f, target());
    }
});
