//! The committed C header must be exactly what cbindgen (the pinned version) generates from
//! src/capi. Regenerate it with `KOLIBRI_BLESS=1 cargo test --release --test c_header`.

use std::path::Path;

#[test]
fn committed_header_matches_the_generated_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(root)
        .with_config(config)
        .generate()
        .expect("cbindgen failed")
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = root.join("include/kolibri.h");
    if std::env::var_os("KOLIBRI_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or(
                committed.lines().count().min(generated.lines().count()),
                |i| i,
            )
            + 1;
        panic!(
            "include/kolibri.h differs from what src/capi generates (first at line {line}); \
             regenerate with KOLIBRI_BLESS=1 cargo test --release --test c_header and commit it"
        );
    }
}
