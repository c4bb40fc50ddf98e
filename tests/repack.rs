//! Repacking at load keeps one copy of the weights resident: the file pages of every repacked
//! tensor are released, so loading costs about the file's size in memory, not file + copies.
//! (Peak as well as final: the repacked buffers fill as the source pages go.)

mod common;

use kolibri::model::Model;

/// (file-backed resident, resident, peak resident) of this process in bytes, from /proc.
fn rss() -> (u64, u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    (
        kib("RssFile:") * 1024,
        kib("VmRSS:") * 1024,
        kib("VmHWM:") * 1024,
    )
}

#[test]
fn repacked_model_holds_one_copy_of_its_weights() {
    if !cfg!(target_os = "linux") {
        return;
    }
    // Gemma ties its 178 MB Q8_0 output head to the embedding and has Q5_0 layers: both are
    // repacked.
    let path = common::model_path("gemma-3-270m-q4_k_m.gguf");
    let file = std::fs::metadata(&path).unwrap().len();
    let model = Model::load(&path).unwrap();
    let (file_rss, after, peak) = rss();
    let w = &model.weights;
    // Distinct matrices (a tied output head is the embedding, counted once).
    let packed_bytes: u64 = w
        .layers
        .iter()
        .flat_map(|l| l.matrices())
        .chain([&w.output])
        .filter(|lin| lin.packed().is_some())
        .map(|lin| (lin.row_bytes() * lin.rows) as u64)
        .sum();
    assert!(
        packed_bytes > file / 2,
        "only {packed_bytes} of {file} bytes repacked"
    );
    // The file pages still resident are those of tensors used in place (plus page edges and
    // the binary's own file pages).
    let slack = 16 << 20;
    assert!(
        file_rss <= file - packed_bytes + slack,
        "file {file} B, {packed_bytes} B repacked, yet {file_rss} B of file pages resident"
    );
    // The repacked copies filled as the source went: no moment with both.
    assert!(
        peak <= after + slack,
        "peak resident {peak} B vs {after} B after loading"
    );
    println!("file {file} B, repacked {packed_bytes} B, file pages resident {file_rss} B, resident {after} B, peak {peak} B");
}
