//! Paged weights: the 1.5B (1066 MiB of weights) under `--mem-budget 512M` streams its
//! layers from the mapped files and generates the same greedy text as with all weights
//! resident, its peak RSS under 600 MiB; the C API's `paged_weights` switch gives the same
//! tokens as a resident load.

mod common;

use std::process::{Command, Stdio};

/// Runs `kolibri run` with `extra` options; returns its text and peak RSS in KiB.
fn run(cache: &std::path::Path, extra: &[&str]) -> (String, i64) {
    let model = common::model_path("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    let child = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "run",
            "-m",
            model.to_str().unwrap(),
            "-p",
            "def fibonacci(n):",
        ])
        .args([
            "-n", "24", "--temp", "0", "-t", "2", "-ctk", "f16", "-ctv", "f16", "--raw",
        ])
        .args(extra)
        .env("KOLIBRI_REPACK_CACHE", cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let read = |p: &mut dyn std::io::Read| {
        let mut s = String::new();
        p.read_to_string(&mut s).map(|_| s)
    };
    let err = std::thread::spawn(move || read(&mut stderr));
    let text = read(&mut stdout).unwrap();
    let err = err.join().unwrap().unwrap();
    // Reaped here, not by `Child::wait`, for the child's own peak RSS.
    let mut status = 0;
    // SAFETY: plain FFI calls with valid out-pointers, for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{err}"
    );
    (text, usage.ru_maxrss)
}

#[test]
fn paged_weights_give_the_same_text_in_bounded_memory() {
    let cache = std::env::temp_dir().join(format!("kolibri-paged-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    let (resident, rss_resident) = run(&cache, &[]);
    let (paged, rss_paged) = run(&cache, &["--mem-budget", "512M"]);
    assert_eq!(paged, resident);
    assert!(
        resident.len() > "def fibonacci(n):".len() + 20,
        "{resident:?}"
    );
    assert!(
        rss_paged < 600 << 10,
        "paged peak RSS {} MiB",
        rss_paged >> 10
    );
    assert!(
        rss_resident > 900 << 10,
        "resident peak RSS {} MiB",
        rss_resident >> 10
    );
    std::fs::remove_dir_all(&cache).unwrap();
}

/// Greedy ids of 16 tokens after `prompt` through the C API, the model loaded with `paged`.
fn capi_greedy(model_path: &std::path::Path, cache: &std::path::Path, paged: bool) -> Vec<i32> {
    use kolibri::capi::context::*;
    use kolibri::capi::model::*;
    use kolibri::capi::sampler::*;
    use kolibri::capi::status::KOLIBRI_STATUS_OK;
    use kolibri::capi::text::kolibri_tokenize;
    use std::ffi::CString;
    use std::ptr::{null, null_mut};

    let path = CString::new(model_path.to_str().unwrap()).unwrap();
    let cache = CString::new(cache.to_str().unwrap()).unwrap();
    // SAFETY: every pointer below is valid for the call, every handle live until freed.
    unsafe {
        let mut params = std::mem::zeroed::<kolibri_model_params>();
        kolibri_model_params_init(&mut params, size_of::<kolibri_model_params>());
        params.repack_cache_dir = cache.as_ptr();
        params.paged_weights = paged;
        let mut model = null_mut();
        assert_eq!(
            kolibri_model_load(path.as_ptr(), &params, &mut model),
            KOLIBRI_STATUS_OK
        );
        let mut ctx = null_mut();
        assert_eq!(
            kolibri_context_new(model, null(), &mut ctx),
            KOLIBRI_STATUS_OK
        );
        let prompt = "def fibonacci(n):";
        let mut tokens = vec![0i32; 64];
        let mut n = 0;
        let status = kolibri_tokenize(
            model,
            prompt.as_ptr().cast(),
            prompt.len(),
            true,
            false,
            tokens.as_mut_ptr(),
            tokens.len(),
            &mut n,
        );
        assert_eq!(status, KOLIBRI_STATUS_OK);
        let mut sp = std::mem::zeroed::<kolibri_sampler_params>();
        kolibri_sampler_params_init(&mut sp, size_of::<kolibri_sampler_params>());
        sp.temperature = 0.0;
        let mut sampler = null_mut();
        assert_eq!(kolibri_sampler_new(&sp, &mut sampler), KOLIBRI_STATUS_OK);
        let mut out = Vec::new();
        let mut next = tokens[..n].to_vec();
        for _ in 0..16 {
            assert_eq!(
                kolibri_context_eval(ctx, next.as_ptr(), next.len()),
                KOLIBRI_STATUS_OK
            );
            let mut token = 0;
            assert_eq!(
                kolibri_sampler_sample(sampler, ctx, &mut token),
                KOLIBRI_STATUS_OK
            );
            out.push(token);
            next = vec![token];
        }
        kolibri_sampler_free(sampler);
        kolibri_context_free(ctx);
        kolibri_model_free(model);
        out
    }
}

#[test]
fn the_c_api_switches_paged_weights_on() {
    use kolibri::capi::model::*;
    use kolibri::capi::status::KOLIBRI_STATUS_INVALID_ARGUMENT;

    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let cache = std::env::temp_dir().join(format!("kolibri-paged-capi-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    // Resident first: it writes the repack cache the paged load then maps.
    let resident = capi_greedy(&model, &cache, false);
    let paged = capi_greedy(&model, &cache, true);
    assert_eq!(paged, resident);
    // The switch reaches the loader: paged weights cannot be locked in memory.
    let path = std::ffi::CString::new(model.to_str().unwrap()).unwrap();
    // SAFETY: valid params, path and out pointer.
    unsafe {
        let mut params = std::mem::zeroed::<kolibri_model_params>();
        kolibri_model_params_init(&mut params, size_of::<kolibri_model_params>());
        params.paged_weights = true;
        params.use_mlock = true;
        let mut handle = std::ptr::null_mut();
        let status = kolibri_model_load(path.as_ptr(), &params, &mut handle);
        assert_eq!(status, KOLIBRI_STATUS_INVALID_ARGUMENT);
        assert!(handle.is_null());
    }
    std::fs::remove_dir_all(&cache).unwrap();
}
