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

/// Every exported function's comment has the three parts docs/c-library.md promises.
#[test]
fn every_function_documents_ownership_errors_and_thread_safety() {
    let header =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/kolibri.h"))
            .unwrap();
    let mut checked = 0;
    let mut rest = header.as_str();
    while let Some(end) = rest.find("*/") {
        let doc = &rest[rest[..end].rfind("/**").unwrap_or(0)..end];
        rest = &rest[end + 2..];
        // The declaration right after the comment; only functions count.
        let decl = rest.trim_start().lines().next().unwrap_or("");
        let Some(name) = decl
            .split('(')
            .next()
            .and_then(|head| head.split_whitespace().last())
            .map(|n| n.trim_start_matches('*'))
            .filter(|n| n.starts_with("kolibri_") && decl.contains('('))
        else {
            continue;
        };
        if decl.starts_with("typedef") {
            continue;
        }
        for part in ["**Ownership:**", "**Errors:**", "**Thread safety:**"] {
            assert!(doc.contains(part), "{name}: its comment lacks {part}");
        }
        checked += 1;
    }
    assert!(
        checked >= 30,
        "only {checked} functions found in the header"
    );
}
