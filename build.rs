//! Gives the shared library a SONAME (cargo sets none on cdylibs), so programs linked against
//! it record `libkolibri.so.MAJOR` and packagers can install versions side by side; and, for
//! the server, compiles the chat page's libraries into the binary (see [`page_libraries`]).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_SERVER").is_some() {
        page_libraries();
    }
    if std::env::var_os("CARGO_FEATURE_SONAME").is_none() {
        return;
    }
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    if target_os == "linux" || target_os == "android" || target_os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkolibri.so.{major}");
    } else if target_os == "macos" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libkolibri.{major}.dylib");
    }
}

/// The chat page's markdown renderer (marked) and code highlighter (highlight.js), pinned with
/// npm's integrity hashes in web/package-lock.json, installed by `npm ci` into OUT_DIR (or
/// taken from `KOLIBRI_WEB_MODULES`, a node_modules folder, for offline builds) and written
/// to OUT_DIR as `page-libraries.js`, `page-highlight.css` and `page-licenses.txt`, which
/// src/server/page.rs includes. Nothing is fetched at run time. Without npm the build goes on
/// with a warning and the page shows replies as plain text.
fn page_libraries() {
    for file in ["web/package.json", "web/package-lock.json"] {
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rerun-if-env-changed=KOLIBRI_WEB_MODULES");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let modules = match std::env::var_os("KOLIBRI_WEB_MODULES") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => npm_ci(&out.join("web")),
    };
    let read = |modules: &Path, file: &str| std::fs::read_to_string(modules.join(file));
    let libraries = modules.and_then(|m| {
        let script = [
            read(&m, "marked/lib/marked.umd.js")?,
            read(&m, "@highlightjs/cdn-assets/highlight.min.js")?,
        ]
        .join("\n;\n");
        let style = format!(
            "{}\n@media (prefers-color-scheme: dark) {{\n{}\n}}\n",
            read(&m, "@highlightjs/cdn-assets/styles/github.min.css")?,
            read(&m, "@highlightjs/cdn-assets/styles/github-dark.min.css")?
        );
        let licenses = format!(
            "The Kolibri chat page includes these libraries, under their licences:\n\n\
             == marked (https://marked.js.org) ==\n\n{}\n\n\
             == highlight.js (https://highlightjs.org) ==\n\n{}\n",
            read(&m, "marked/LICENSE")?,
            read(&m, "@highlightjs/cdn-assets/LICENSE")?
        );
        Ok((script, style, licenses))
    });
    let (script, style, licenses) = libraries.unwrap_or_else(|e| {
        println!(
            "cargo:warning=the chat page is built without its markdown libraries ({e}); \
             install npm, or set KOLIBRI_WEB_MODULES to a node_modules folder installed from \
             web/package-lock.json"
        );
        let none = "// Built without the markdown libraries: replies show as plain text.\n";
        (
            none.into(),
            String::new(),
            "No third-party libraries.\n".into(),
        )
    });
    for (name, text) in [
        ("page-libraries.js", script),
        ("page-highlight.css", style),
        ("page-licenses.txt", licenses),
    ] {
        std::fs::write(out.join(name), text).expect("OUT_DIR is writable");
    }
}

/// `npm ci` of web/'s lock file in `dir`, unless that lock is already installed there.
fn npm_ci(dir: &Path) -> std::io::Result<PathBuf> {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let lock = std::fs::read(manifest.join("web/package-lock.json"))?;
    let installed = dir.join("installed-lock.json");
    if std::fs::read(&installed).ok().as_deref() != Some(&lock[..]) {
        std::fs::create_dir_all(dir)?;
        std::fs::copy(manifest.join("web/package.json"), dir.join("package.json"))?;
        std::fs::write(dir.join("package-lock.json"), &lock)?;
        let status = Command::new("npm")
            .args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--silent",
            ])
            .current_dir(dir)
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!("npm ci: {status}")));
        }
        std::fs::write(&installed, &lock)?;
    }
    Ok(dir.join("node_modules"))
}
