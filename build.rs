//! Gives the shared library a SONAME (cargo sets none on cdylibs), so programs linked against
//! it record `libkolibri.so.MAJOR` and packagers can install versions side by side.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
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
