//! Any byte string given to the GGUF reader yields a file or an error, never a panic, and every
//! tensor of a file it accepts lies within the data it was given. The same bytes cut where
//! "GGUF" starts again are read as the parts of a split model: every tensor within its part.
#![no_main]

use kolibri::gguf::GgufFile;
use libfuzzer_sys::fuzz_target;

/// Most parts tried (a split model of a thousand tiny parts only slows the fuzzer).
const MAX_PARTS: usize = 8;

fn check(f: &GgufFile) {
    for t in f.tensors() {
        assert_eq!(f.tensor_data(t).len() as u64, t.size);
        let part = &f.parts()[t.part];
        let start = f.tensor_start(t);
        assert!(part.data().contains(&start) || t.size == 0);
        assert!(start + t.size as usize <= part.data().end);
    }
    for (_, v) in f.metadata() {
        let _ = v.summary();
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = GgufFile::from_bytes(data.to_vec()) {
        check(&f);
    }
    let mut starts: Vec<usize> = (1..data.len().saturating_sub(3))
        .filter(|&i| &data[i..i + 4] == b"GGUF")
        .take(MAX_PARTS - 1)
        .collect();
    if starts.is_empty() {
        return;
    }
    starts.insert(0, 0);
    starts.push(data.len());
    let parts: Vec<Vec<u8>> = starts.windows(2).map(|w| data[w[0]..w[1]].to_vec()).collect();
    if let Ok(f) = GgufFile::from_part_bytes(&parts) {
        check(&f);
    }
});
