//! Random sequences of C API calls on a few handles (contexts, samplers, a speculator) over one
//! real model, with fuzzed sizes, ids, capacities, params and texts, the way a buggy C program
//! would make them (but within the header's contract: no freed or forged handles). Run under
//! AddressSanitizer (cargo fuzz's default), so a read or write past any buffer is caught.
//! Checked on every call: no panic status, a failure leaves a last-error text, and the buffer
//! conventions hold (OK: the output fits and text is NUL-terminated; BUFFER_TOO_SMALL: the size
//! written does not fit). Needs KOLIBRI_FUZZ_MODEL (a small GGUF such as qwen3-tiny-v1.gguf).
#![no_main]

use std::ffi::{c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use kolibri::capi::chat::*;
use kolibri::capi::constraint::*;
use kolibri::capi::context::*;
use kolibri::capi::guard::kolibri_last_error;
use kolibri::capi::kolibri_status;
use kolibri::capi::model::*;
use kolibri::capi::sampler::*;
use kolibri::capi::speculative::*;
use kolibri::capi::state::*;
use kolibri::capi::status::*;
use kolibri::capi::text::*;
use libfuzzer_sys::fuzz_target;

/// The model every sequence shares (a handle is safe to share: models are immutable).
struct Shared(*mut kolibri_model, i32);
// SAFETY: the C API documents kolibri_model as usable from any number of threads at once.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

fn model() -> &'static Shared {
    static MODEL: OnceLock<Shared> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = std::env::var("KOLIBRI_FUZZ_MODEL").expect("set KOLIBRI_FUZZ_MODEL");
        let path = CString::new(path).unwrap();
        let mut model = null_mut();
        // SAFETY: valid C string, NULL params (defaults), a valid out pointer.
        let status = unsafe { kolibri_model_load(path.as_ptr(), null(), &mut model) };
        assert_eq!(status, KOLIBRI_STATUS_OK, "the model loads");
        let mut dims = kolibri_model_dims::default();
        // SAFETY: a live model and a struct of the size passed.
        let status =
            unsafe { kolibri_model_get_dims(model, &mut dims, size_of::<kolibri_model_dims>()) };
        assert_eq!(status, KOLIBRI_STATUS_OK);
        Shared(model, dims.n_vocab)
    })
}

/// Reads the fuzz input as a stream of small decisions; an exhausted input reads zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.u8() as usize % choices.len()]
    }
    fn bytes(&mut self, max: usize) -> &[u8] {
        let n = (self.u8() as usize).min(max).min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }
    /// Text without interior NULs (C strings), possibly invalid UTF-8.
    fn c_string(&mut self) -> CString {
        CString::new(
            self.bytes(64)
                .iter()
                .map(|&b| b.max(1))
                .collect::<Vec<u8>>(),
        )
        .unwrap()
    }
    /// A token id: mostly valid, sometimes just past the vocabulary or negative.
    fn token(&mut self, n_vocab: i32) -> i32 {
        match self.u8() % 8 {
            0 => -1 - (self.u8() as i32),
            1 => n_vocab + self.u8() as i32,
            2 => i32::MAX,
            _ => (self.u32() % n_vocab as u32) as i32,
        }
    }
    /// A float for sampler params: ordinary values and the ones that break arithmetic.
    fn float(&mut self) -> f32 {
        let special = [
            0.0,
            -1.0,
            1.0,
            0.5,
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            1e30,
        ];
        match self.u8() % 3 {
            0 => self.pick(&special),
            _ => self.u16() as f32 / 1000.0,
        }
    }
    fn capacity(&mut self) -> usize {
        self.pick(&[0, 1, 2, 3, 8, 64, 4096])
    }
}

/// Every call's status: never a panic, and a failure explains itself.
fn checked(status: kolibri_status) -> kolibri_status {
    assert!((0..=15).contains(&status), "unknown status {status}");
    assert_ne!(
        status, KOLIBRI_STATUS_PANIC,
        "a panic was caught at the boundary"
    );
    if status != KOLIBRI_STATUS_OK {
        // SAFETY: the API returns a NUL-terminated string valid until the next failure.
        let text = unsafe { CStr::from_ptr(kolibri_last_error()) };
        assert!(
            !text.to_bytes().is_empty(),
            "status {status} without an error text"
        );
    }
    status
}

/// The text-buffer convention: OK writes `len` bytes and a NUL within `capacity`;
/// BUFFER_TOO_SMALL writes a `len` that does not fit.
fn check_text(status: kolibri_status, buf: &[u8], capacity: usize, len: usize) {
    match checked(status) {
        KOLIBRI_STATUS_OK => assert!(len < capacity && buf[len] == 0, "{len} in {capacity}"),
        KOLIBRI_STATUS_BUFFER_TOO_SMALL => assert!(len >= capacity, "{len} in {capacity}"),
        _ => {}
    }
}

/// The array convention: as text, without the NUL.
fn check_array(status: kolibri_status, capacity: usize, len: usize) {
    match checked(status) {
        KOLIBRI_STATUS_OK => assert!(len <= capacity, "{len} in {capacity}"),
        KOLIBRI_STATUS_BUFFER_TOO_SMALL => assert!(len > capacity, "{len} in {capacity}"),
        _ => {}
    }
}

/// A params struct as a caller compiled it: the current size, an older (shorter) one, a newer
/// one whose unknown tail is zero or not, or a size that is no size.
fn versioned<T: Copy>(input: &mut Input, params: T) -> Vec<u8> {
    let size = size_of::<T>();
    let (claimed, tail) = input.pick(&[
        (size, 0u8),
        (size, 0),
        (size_of::<usize>() + 4, 0),
        (size + 8, 0),
        (size + 8, 1),
        (0, 0),
    ]);
    let mut bytes = vec![tail; size.max(claimed)];
    // SAFETY: `bytes` holds at least size_of::<T>() bytes and T is plain data.
    unsafe {
        std::ptr::copy_nonoverlapping(&params as *const T as *const u8, bytes.as_mut_ptr(), size)
    };
    bytes[..size_of::<usize>()].copy_from_slice(&claimed.to_ne_bytes());
    bytes
}

/// The handles one sequence works on; all freed at its end.
struct Handles {
    contexts: [*mut kolibri_context; 3],
    samplers: [*mut kolibri_sampler; 2],
    speculator: *mut kolibri_speculator,
    saved: Vec<u8>,
    /// What the abort callback answers (set per context call).
    abort: Box<bool>,
}

impl Drop for Handles {
    fn drop(&mut self) {
        // SAFETY: each handle is live or NULL (a no-op), and is freed once.
        unsafe {
            kolibri_speculator_free(self.speculator);
            self.samplers.iter().for_each(|&s| kolibri_sampler_free(s));
            self.contexts.iter().for_each(|&c| kolibri_context_free(c));
        }
    }
}

unsafe extern "C" fn abort_callback(user_data: *mut c_void) -> bool {
    // SAFETY: user_data is the Box<bool> the handles own, alive as long as the contexts.
    unsafe { *(user_data as *const bool) }
}

fuzz_target!(
    init: {
        // Before any input (so LeakSanitizer's per-input accounting never sees them): the
        // shared model, and the calling thread's last-error slot, which a first failure
        // allocates once together with its thread-exit destructor.
        model();
        // SAFETY: a NULL sampler is a documented INVALID_ARGUMENT.
        unsafe { kolibri_sampler_reset(null_mut()) };
    },
    |data: &[u8]| {
    let shared = model();
    let (model, n_vocab) = (shared.0 as *const kolibri_model, shared.1);
    let mut input = Input(data);
    let mut h = Handles {
        contexts: [null_mut(); 3],
        samplers: [null_mut(); 2],
        speculator: null_mut(),
        saved: Vec::new(),
        abort: Box::new(false),
    };
    for _ in 0..64 {
        if input.0.is_empty() {
            break;
        }
        let op = input.u8() % 20;
        // SAFETY (whole block): every handle passed is live or NULL, every buffer is as long
        // as the capacity passed, every string is NUL-terminated.
        unsafe { step(op, &mut input, &mut h, model, n_vocab) };
    }
    }
);

unsafe fn step(
    op: u8,
    input: &mut Input,
    h: &mut Handles,
    model: *const kolibri_model,
    n_vocab: i32,
) {
    let c = input.u8() as usize % 3;
    let s = input.u8() as usize % 2;
    unsafe {
        match op {
            0 => {
                let mut p = std::mem::zeroed::<kolibri_context_params>();
                checked(kolibri_context_params_init(
                    &mut p,
                    size_of::<kolibri_context_params>(),
                ));
                p.n_ctx = input.pick(&[0, 1, 7, 32, 100, 256, 1 << 20]);
                p.n_threads = input.u8() as u32 % 4;
                p.n_batch = input.pick(&[0, 1, 5, 64]);
                p.type_k = input.pick(&[0, 1, 2, 3, -1]);
                p.type_v = input.pick(&[0, 1, 2, 3, -1]);
                let bytes = versioned(input, p);
                let params = if input.u8() == 0 {
                    null()
                } else {
                    bytes.as_ptr().cast()
                };
                let mut ctx = null_mut();
                if checked(kolibri_context_new(model, params, &mut ctx)) == KOLIBRI_STATUS_OK {
                    kolibri_context_free(std::mem::replace(&mut h.contexts[c], ctx));
                    let flag = &*h.abort as *const bool as *mut c_void;
                    checked(kolibri_context_set_abort_callback(
                        ctx,
                        Some(abort_callback),
                        flag,
                    ));
                } else {
                    assert!(ctx.is_null(), "an output written on failure");
                }
            }
            1 => kolibri_context_free(std::mem::replace(&mut h.contexts[c], null_mut())),
            2 => {
                let n = input.u8() as usize % 40;
                let tokens: Vec<i32> = (0..n).map(|_| input.token(n_vocab)).collect();
                *h.abort = input.u8() == 0;
                let status = checked(kolibri_context_eval(h.contexts[c], tokens.as_ptr(), n));
                *h.abort = false;
                if status == KOLIBRI_STATUS_OK && n > 0 {
                    let (mut logits, mut len) = (null(), 0);
                    checked(kolibri_context_logits(h.contexts[c], &mut logits, &mut len));
                    assert_eq!(len, n_vocab as usize);
                    // Read every logit: ASan catches a pointer to less than n_vocab floats.
                    let row = std::slice::from_raw_parts(logits, len);
                    std::hint::black_box(row.iter().sum::<f32>());
                }
            }
            3 => {
                let (mut logits, mut len) = (null(), 0);
                if checked(kolibri_context_logits(h.contexts[c], &mut logits, &mut len)) == 0 {
                    let row = std::slice::from_raw_parts(logits, len);
                    std::hint::black_box(row.iter().sum::<f32>());
                }
            }
            4 => {
                checked(kolibri_context_rewind(
                    h.contexts[c],
                    input.u16() as usize % 300,
                ));
                let (mut n, mut n_ctx) = (0, 0);
                if checked(kolibri_context_size(h.contexts[c], &mut n, &mut n_ctx)) == 0 {
                    assert!(n <= n_ctx);
                }
            }
            5 => {
                let mut p = std::mem::zeroed::<kolibri_sampler_params>();
                checked(kolibri_sampler_params_init(
                    &mut p,
                    size_of::<kolibri_sampler_params>(),
                ));
                p.temperature = input.float();
                p.top_k = input.pick(&[0, 1, 40, -5, i32::MAX]);
                p.top_p = input.float();
                p.min_p = input.float();
                p.repeat_penalty = input.float();
                p.frequency_penalty = input.float();
                p.presence_penalty = input.float();
                p.penalty_last_n = input.pick(&[0, 64, -1, i32::MAX]);
                p.seed = input.u32() as u64;
                let bytes = versioned(input, p);
                let mut sampler = null_mut();
                if checked(kolibri_sampler_new(bytes.as_ptr().cast(), &mut sampler)) == 0 {
                    kolibri_sampler_free(std::mem::replace(&mut h.samplers[s], sampler));
                }
            }
            6 => kolibri_sampler_free(std::mem::replace(&mut h.samplers[s], null_mut())),
            7 => {
                let mut token = -1;
                if checked(kolibri_sampler_sample(
                    h.samplers[s],
                    h.contexts[c],
                    &mut token,
                )) == 0
                {
                    assert!((0..n_vocab).contains(&token), "sampled {token}");
                    checked(kolibri_sampler_accept(h.samplers[s], token));
                }
            }
            8 => {
                checked(kolibri_sampler_accept(h.samplers[s], input.token(n_vocab)));
                if input.bool() {
                    checked(kolibri_sampler_reset(h.samplers[s]));
                }
            }
            9 => {
                let text = input.bytes(200).to_vec();
                let capacity = input.capacity();
                let mut tokens = vec![0i32; capacity];
                let mut n = 0;
                let status = kolibri_tokenize(
                    model,
                    text.as_ptr().cast(),
                    text.len(),
                    input.bool(),
                    input.bool(),
                    tokens.as_mut_ptr(),
                    capacity,
                    &mut n,
                );
                check_array(status, capacity, n);
                if status == KOLIBRI_STATUS_OK {
                    assert!(tokens[..n].iter().all(|t| (0..n_vocab).contains(t)));
                }
            }
            10 => {
                let capacity = input.capacity();
                let mut buf = vec![0xffu8; capacity];
                let mut len = 0;
                let token = input.token(n_vocab);
                let status = kolibri_token_to_piece(
                    model,
                    token,
                    input.bool(),
                    buf.as_mut_ptr().cast(),
                    capacity,
                    &mut len,
                );
                check_text(status, &buf, capacity, len);
            }
            11 => {
                let n = input.u8() as usize % 16;
                let tokens: Vec<i32> = (0..n).map(|_| input.token(n_vocab)).collect();
                let capacity = input.capacity();
                let mut buf = vec![0xffu8; capacity];
                let mut len = 0;
                let status = kolibri_detokenize(
                    model,
                    tokens.as_ptr(),
                    n,
                    input.bool(),
                    buf.as_mut_ptr().cast(),
                    capacity,
                    &mut len,
                );
                check_text(status, &buf, capacity, len);
            }
            12 => {
                let mut size = 0;
                if checked(kolibri_context_state_size(h.contexts[c], &mut size)) == 0 {
                    let capacity = if input.bool() { size } else { size / 2 };
                    let mut buf = vec![0u8; capacity];
                    let mut written = 0;
                    let status = kolibri_context_state_save(
                        h.contexts[c],
                        buf.as_mut_ptr(),
                        capacity,
                        &mut written,
                    );
                    check_array(status, capacity, written);
                    if status == KOLIBRI_STATUS_OK {
                        buf.truncate(written);
                        h.saved = buf;
                    }
                }
            }
            13 => {
                // A saved state as it was, cut short, with a byte changed, or fuzzed bytes.
                let mut state = h.saved.clone();
                match input.u8() % 4 {
                    0 => {}
                    1 => state.truncate(input.u16() as usize),
                    2 if !state.is_empty() => {
                        let i = input.u32() as usize % state.len();
                        state[i] ^= input.u8().max(1);
                    }
                    _ => state = input.bytes(255).to_vec(),
                }
                let before = context_tokens(h.contexts[c]);
                let status = checked(kolibri_context_state_load(
                    h.contexts[c],
                    state.as_ptr(),
                    state.len(),
                ));
                if status != KOLIBRI_STATUS_OK {
                    assert_eq!(
                        context_tokens(h.contexts[c]),
                        before,
                        "a refused state changed it"
                    );
                }
            }
            14 => {
                let capacity = input.capacity();
                let mut buf = vec![0i32; capacity];
                let mut n = 0;
                let status =
                    kolibri_context_tokens(h.contexts[c], buf.as_mut_ptr(), capacity, &mut n);
                check_array(status, capacity, n);
            }
            15 => {
                let owned: Vec<(CString, CString)> = (0..input.u8() % 5)
                    .map(|_| {
                        let role = input.pick(&["system", "user", "assistant", "tool", "x"]);
                        (CString::new(role).unwrap(), input.c_string())
                    })
                    .collect();
                let messages: Vec<kolibri_chat_message> = owned
                    .iter()
                    .map(|(r, t)| kolibri_chat_message {
                        role: r.as_ptr(),
                        content: t.as_ptr(),
                    })
                    .collect();
                let source = input.c_string();
                let template = if input.bool() {
                    null()
                } else {
                    source.as_ptr()
                };
                let capacity = input.capacity();
                let mut buf = vec![0xffu8; capacity];
                let mut len = 0;
                let status = kolibri_chat_apply_template(
                    model,
                    template,
                    messages.as_ptr(),
                    messages.len(),
                    input.bool(),
                    buf.as_mut_ptr().cast(),
                    capacity,
                    &mut len,
                );
                check_text(status, &buf, capacity, len);
            }
            16 => {
                let capacity = input.capacity();
                let mut buf = vec![0xffu8; capacity];
                let mut len = 0;
                let status = match input.u8() % 4 {
                    0 => {
                        let key = input.c_string();
                        kolibri_model_meta_string(
                            model,
                            key.as_ptr(),
                            buf.as_mut_ptr().cast(),
                            capacity,
                            &mut len,
                        )
                    }
                    1 => kolibri_model_meta_key(
                        model,
                        input.u8() as usize,
                        buf.as_mut_ptr().cast(),
                        capacity,
                        &mut len,
                    ),
                    2 => kolibri_model_chat_template(
                        model,
                        buf.as_mut_ptr().cast(),
                        capacity,
                        &mut len,
                    ),
                    _ => kolibri_model_architecture(
                        model,
                        buf.as_mut_ptr().cast(),
                        capacity,
                        &mut len,
                    ),
                };
                check_text(status, &buf, capacity, len);
            }
            17 => {
                let mut token = 0;
                checked(kolibri_model_special_token(
                    model,
                    input.u8() as i32 - 2,
                    &mut token,
                ));
                let mut eog = false;
                checked(kolibri_model_token_is_eog(
                    model,
                    input.token(n_vocab),
                    &mut eog,
                ));
                // A caller's dims struct of another version: only `out_size` bytes written.
                let out_size = input.pick(&[0, 4, 8, 16, size_of::<kolibri_model_dims>() + 8]);
                let mut buf = vec![0xa5u8; out_size + 16];
                let status = checked(kolibri_model_get_dims(
                    model,
                    buf.as_mut_ptr().cast(),
                    out_size,
                ));
                assert!(
                    buf[out_size..].iter().all(|&b| b == 0xa5),
                    "wrote past out_size"
                );
                let _ = status;
            }
            18 => {
                if input.bool() {
                    checked(kolibri_sampler_clear_constraint(h.samplers[s]));
                } else {
                    let text = input.c_string();
                    let kind = input.u8() as i32 % 7 - 1;
                    checked(kolibri_sampler_set_constraint(
                        h.samplers[s],
                        model,
                        kind,
                        text.as_ptr(),
                    ));
                }
            }
            _ => speculate(input, h, c, s),
        }
    }
}

/// The speculator: created over a target and an optional draft (any of the contexts, the
/// same one twice included), stepped, its stats read, freed.
unsafe fn speculate(input: &mut Input, h: &mut Handles, c: usize, s: usize) {
    let draft = match input.u8() % 4 {
        0 => null_mut(),
        d => h.contexts[d as usize - 1],
    };
    unsafe {
        match input.u8() % 3 {
            0 => {
                let mut p = std::mem::zeroed::<kolibri_speculator_params>();
                checked(kolibri_speculator_params_init(
                    &mut p,
                    size_of::<kolibri_speculator_params>(),
                ));
                p.max_draft = input.pick(&[0, 1, 4, 16, 33]);
                p.draft_p_min = input.float();
                p.lookup_ngram = input.pick(&[0, 1, 4, 17]);
                let bytes = versioned(input, p);
                let mut spec = null_mut();
                if checked(kolibri_speculator_new(
                    h.contexts[c],
                    draft,
                    bytes.as_ptr().cast(),
                    &mut spec,
                )) == 0
                {
                    kolibri_speculator_free(std::mem::replace(&mut h.speculator, spec));
                }
            }
            1 => {
                let capacity = input.pick(&[0, 1, 4, 40]);
                let mut out = vec![0i32; capacity];
                let mut n = 0;
                let status = kolibri_speculator_step(
                    h.speculator,
                    h.contexts[c],
                    draft,
                    h.samplers[s],
                    input.token(1 << 16),
                    out.as_mut_ptr(),
                    capacity,
                    &mut n,
                );
                check_array(status, capacity, n);
                let mut stats = std::mem::zeroed::<kolibri_speculator_stats>();
                checked(kolibri_speculator_get_stats(h.speculator, &mut stats));
            }
            _ => kolibri_speculator_free(std::mem::replace(&mut h.speculator, null_mut())),
        }
    }
}

/// A context's tokens (empty for NULL).
unsafe fn context_tokens(ctx: *mut kolibri_context) -> Vec<i32> {
    let mut n = 0;
    // SAFETY: a live context or NULL; a zero-capacity probe, then a buffer of the size told.
    unsafe {
        if kolibri_context_tokens(ctx, null_mut(), 0, &mut n) == KOLIBRI_STATUS_INVALID_ARGUMENT {
            return Vec::new();
        }
        let mut buf = vec![0; n];
        let status = kolibri_context_tokens(ctx, buf.as_mut_ptr(), n, &mut n);
        assert_eq!(status, KOLIBRI_STATUS_OK);
        buf
    }
}
