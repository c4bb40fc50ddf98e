//! Model loading (architecture, hyperparameters, tensor shapes, tokenizer) on arbitrary GGUF
//! images: an error or a model, never a panic.
#![no_main]

use kolibri::gguf::GgufFile;
use kolibri::model::Model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = GgufFile::from_bytes(data.to_vec()) {
        let _ = Model::from_gguf(f);
    }
});
