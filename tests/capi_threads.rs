//! The C API's threading contract (include/kolibri.h, "Thread safety"), exercised through the
//! exported functions exactly as a C caller would use them:
//! - one model shared by several threads, each with its own context, decodes concurrently and
//!   gets bit-identical results to running the same work sequentially;
//! - a context entered by a second thread while a call is running is refused (INVALID_STATE),
//!   not raced.

mod common;

use std::ffi::{c_void, CStr, CString};
use std::ptr;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};

use kolibri::capi::context::*;
use kolibri::capi::guard::kolibri_last_error;
use kolibri::capi::model::*;
use kolibri::capi::sampler::*;
use kolibri::capi::status::*;
use kolibri::capi::text::*;

const MODEL: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

fn ok(status: kolibri_status, what: &str) {
    if status != KOLIBRI_STATUS_OK {
        let msg = unsafe { CStr::from_ptr(kolibri_last_error()) };
        panic!("{what}: {status:?}: {}", msg.to_string_lossy());
    }
}

/// Handles are raw pointers; tests move them between threads the way C programs do.
struct Shared<T>(*mut T);
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

fn load() -> Shared<kolibri_model> {
    let path = CString::new(common::model_path(MODEL).to_str().unwrap()).unwrap();
    let mut model = ptr::null_mut();
    ok(
        unsafe { kolibri_model_load(path.as_ptr(), ptr::null(), &mut model) },
        "load",
    );
    Shared(model)
}

fn tokenize(model: *const kolibri_model, text: &str) -> Vec<i32> {
    let mut ids = vec![0i32; 256];
    let mut n = 0usize;
    ok(
        unsafe {
            kolibri_tokenize(
                model,
                text.as_ptr().cast(),
                text.len(),
                true,
                false,
                ids.as_mut_ptr(),
                ids.len(),
                &mut n,
            )
        },
        "tokenize",
    );
    ids.truncate(n);
    ids
}

/// Greedy generation on a fresh one-thread context: the tokens and the final logits.
fn generate(model: Shared<kolibri_model>, prompt: &str, n: usize) -> (Vec<i32>, Vec<f32>) {
    let model = model.0.cast_const();
    let ids = tokenize(model, prompt);
    let mut cp = unsafe { std::mem::zeroed::<kolibri_context_params>() };
    ok(
        unsafe { kolibri_context_params_init(&mut cp, std::mem::size_of_val(&cp)) },
        "params",
    );
    cp.n_ctx = 256;
    cp.n_threads = 1;
    let mut ctx = ptr::null_mut();
    ok(
        unsafe { kolibri_context_new(model, &cp, &mut ctx) },
        "context",
    );
    let mut sp = unsafe { std::mem::zeroed::<kolibri_sampler_params>() };
    ok(
        unsafe { kolibri_sampler_params_init(&mut sp, std::mem::size_of_val(&sp)) },
        "params",
    );
    sp.temperature = 0.0;
    let mut sampler = ptr::null_mut();
    ok(unsafe { kolibri_sampler_new(&sp, &mut sampler) }, "sampler");

    ok(
        unsafe { kolibri_context_eval(ctx, ids.as_ptr(), ids.len()) },
        "eval prompt",
    );
    let mut out = Vec::new();
    for _ in 0..n {
        let mut next = -1;
        ok(
            unsafe { kolibri_sampler_sample(sampler, ctx, &mut next) },
            "sample",
        );
        out.push(next);
        ok(unsafe { kolibri_context_eval(ctx, &next, 1) }, "eval");
    }
    let (mut logits, mut n_vocab) = (ptr::null(), 0usize);
    ok(
        unsafe { kolibri_context_logits(ctx, &mut logits, &mut n_vocab) },
        "logits",
    );
    let logits = unsafe { std::slice::from_raw_parts(logits, n_vocab) }.to_vec();
    unsafe {
        kolibri_sampler_free(sampler);
        kolibri_context_free(ctx);
    }
    (out, logits)
}

#[test]
fn contexts_on_one_model_decode_concurrently_like_sequentially() {
    let model = load();
    let prompts = [
        "def quicksort(items):",
        "The three primary colors are",
        "SELECT name FROM users WHERE",
    ];
    let sequential: Vec<_> = prompts.iter().map(|p| generate(model, p, 12)).collect();

    let start = Arc::new(Barrier::new(prompts.len()));
    let handles: Vec<_> = prompts
        .iter()
        .map(|&p| {
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                start.wait();
                generate(model, p, 12)
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let concurrent = h.join().unwrap();
        assert_eq!(concurrent.0, sequential[i].0, "tokens of prompt {i}");
        assert!(
            concurrent.1 == sequential[i].1,
            "final logits of prompt {i} differ between concurrent and sequential runs"
        );
    }
    // Different prompts gave different continuations (the comparison above is not vacuous).
    assert_ne!(sequential[0].0, sequential[1].0);
    unsafe { kolibri_model_free(model.0) };
}

/// The abort callback's view of the test: tells the main thread the eval is running, then
/// holds it there until the main thread has tried its concurrent call.
struct Rendezvous {
    entered: mpsc::SyncSender<()>,
    release: std::sync::Mutex<mpsc::Receiver<()>>,
    first: std::sync::atomic::AtomicBool,
}

unsafe extern "C" fn hold_eval(user_data: *mut c_void) -> bool {
    let r = unsafe { &*(user_data as *const Rendezvous) };
    if r.first.swap(false, std::sync::atomic::Ordering::SeqCst) {
        r.entered.send(()).unwrap();
        r.release.lock().unwrap().recv().unwrap();
    }
    false
}

#[test]
fn a_context_busy_in_one_thread_refuses_another() {
    let model = load();
    let mut ctx = ptr::null_mut();
    ok(
        unsafe { kolibri_context_new(model.0, ptr::null(), &mut ctx) },
        "context",
    );
    let ctx = Shared(ctx);
    let (entered_tx, entered_rx) = mpsc::sync_channel(1);
    let (release_tx, release_rx) = mpsc::channel();
    let rendezvous = Box::new(Rendezvous {
        entered: entered_tx,
        release: std::sync::Mutex::new(release_rx),
        first: std::sync::atomic::AtomicBool::new(true),
    });
    let user_data = &*rendezvous as *const Rendezvous as *mut c_void;
    ok(
        unsafe { kolibri_context_set_abort_callback(ctx.0, Some(hold_eval), user_data) },
        "set abort",
    );
    let ids = tokenize(model.0, "Hello there");
    let evaluating = std::thread::spawn(move || {
        let ctx = ctx;
        unsafe { kolibri_context_eval(ctx.0, ids.as_ptr(), ids.len()) }
    });
    entered_rx.recv().unwrap();
    // The eval is inside the context now: a second thread must be turned away, not let in.
    let mut held = 0usize;
    let status = unsafe { kolibri_context_size(ctx.0, &mut held, ptr::null_mut()) };
    assert_eq!(status, KOLIBRI_STATUS_INVALID_STATE);
    let msg = unsafe { CStr::from_ptr(kolibri_last_error()) }.to_string_lossy();
    assert!(msg.contains("another thread"), "{msg}");
    release_tx.send(()).unwrap();
    assert_eq!(evaluating.join().unwrap(), KOLIBRI_STATUS_OK);
    // Once the call returned, the context is usable from this thread again.
    ok(
        unsafe { kolibri_context_size(ctx.0, &mut held, ptr::null_mut()) },
        "size",
    );
    assert_eq!(held, tokenize(model.0, "Hello there").len());
    unsafe {
        kolibri_context_free(ctx.0);
        kolibri_model_free(model.0);
    }
    drop(rendezvous);
}

#[test]
fn freeing_the_model_first_keeps_its_contexts_working() {
    let model = load();
    let ids = tokenize(model.0, "Once upon a time");
    let mut ctx = ptr::null_mut();
    ok(
        unsafe { kolibri_context_new(model.0, ptr::null(), &mut ctx) },
        "context",
    );
    unsafe { kolibri_model_free(model.0) };
    ok(
        unsafe { kolibri_context_eval(ctx, ids.as_ptr(), ids.len()) },
        "eval after the model handle was freed",
    );
    unsafe { kolibri_context_free(ctx) };
}
