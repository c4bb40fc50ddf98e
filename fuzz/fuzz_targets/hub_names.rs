//! What users, the Hub and other tools' stores hand the model-by-name code: a name
//! (`OWNER/REPO[:QUANT]`), the Hub's repository listing (JSON), file names to pick from and
//! read a quantization from, and Ollama manifests. Never a panic; an accepted name's
//! parts are path-safe; an accepted listing holds only path-safe
//! files with sha256s; what pick() picks is in what it was given.
#![no_main]

use kolibri::hub::{is_safe_repo_path, pick, quant_tag, HubName, Listing};
use kolibri::store::ollama::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(name) = HubName::parse(&text) {
        for part in [&name.owner, &name.repo] {
            assert!(!part.contains('/') && part != ".." && part != ".");
        }
    }
    if let Ok(listing) = Listing::parse(&text) {
        assert_eq!(listing.commit.len(), 40);
        for f in &listing.files {
            assert!(is_safe_repo_path(&f.path) && f.sha256.len() == 64, "{f:?}");
        }
        let paths: Vec<String> = listing.files.iter().map(|f| f.path.clone()).collect();
        if let Ok(picked) = pick(&paths, None) {
            assert!(picked.iter().all(|p| paths.contains(p)));
        }
    }
    // An Ollama manifest: every digest accepted names a blob file, nothing else.
    if let Ok(manifest) = Manifest::parse(data) {
        for layer in &manifest.layers {
            assert!(layer.sha256.len() == 64 && layer.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }
    if let Some(tag) = quant_tag(&text) {
        assert!(!tag.is_empty() && !tag.contains(['/', '-', '.']));
    }
    // The first line a quantization, the rest a repository's file names.
    let mut lines = text.lines();
    let quant = lines.next().filter(|q| !q.is_empty());
    let files: Vec<String> = lines.map(str::to_owned).collect();
    if let Ok(picked) = pick(&files, quant) {
        assert!(!picked.is_empty() && picked.iter().all(|p| files.contains(p)));
    }
});
