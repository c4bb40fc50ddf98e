//! libllama.so gets a SONAME of its own (libllama.so.0 is llama.cpp's): programs linked
//! against Kolibri's shim record that name and never pick up a system libllama by accident.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-cdylib=-Wl,-soname,libllama-kolibri.so.0");
    }
}
