//! Any byte string given to the GGUF reader yields a file or an error, never a panic, and every
//! tensor of a file it accepts lies within the data it was given.
#![no_main]

use kolibri::gguf::GgufFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = GgufFile::from_bytes(data.to_vec()) {
        for t in f.tensors() {
            assert_eq!(f.tensor_data(t).len() as u64, t.size);
        }
        for (_, v) in f.metadata() {
            let _ = v.summary();
        }
    }
});
