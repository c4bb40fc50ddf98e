//! llama.h's sampler API. A `llama_sampler` is an interface table plus a context pointer, so
//! user code can bring its own samplers; Kolibri's built-in ones share one table
//! ([`BUILTIN`]) whose context is a boxed [`Stage`]. A chain is a stage too, holding the
//! samplers added to it (owned: freed with it).

mod candidates;
mod grammar;
mod stages;

use crate::context::llama_context;
use crate::guard::{c_str, guard, handle, slice};
use crate::log;
use crate::types::*;
use candidates::Candidates;
use stages::*;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::time::{Duration, Instant};

/// One built-in sampler's algorithm and state.
pub trait Stage: Send + StageClone {
    fn name(&self) -> &'static CStr;
    fn apply(&mut self, cur: &mut Candidates);
    fn accept(&mut self, _token: llama_token) {}
    fn reset(&mut self) {}
    /// The seed in use, for samplers that draw.
    fn seed(&self) -> Option<u32> {
        None
    }
    fn as_chain(&mut self) -> Option<&mut Chain> {
        None
    }
}

/// A copy of a stage, `None` when it holds something that cannot be copied (a user sampler).
pub trait StageClone {
    fn clone_stage(&self) -> Option<Box<dyn Stage>>;
}

impl<T: Stage + Clone + 'static> StageClone for T {
    fn clone_stage(&self) -> Option<Box<dyn Stage>> {
        Some(Box::new(self.clone()))
    }
}

type Boxed = Box<dyn Stage>;

/// The stage behind a built-in sampler, `None` for a user's sampler.
///
/// # Safety
/// `smpl` is NULL or a live sampler.
unsafe fn stage<'a>(smpl: *const llama_sampler) -> Option<&'a mut Boxed> {
    // SAFETY: the caller's contract; built-in contexts are `Box<Boxed>`s from `wrap`.
    unsafe {
        let s = smpl.as_ref()?;
        (ptr::eq(s.iface, &BUILTIN) && !s.ctx.is_null()).then(|| &mut *s.ctx.cast::<Boxed>())
    }
}

fn wrap(stage: Boxed) -> *mut llama_sampler {
    Box::into_raw(Box::new(llama_sampler {
        iface: &BUILTIN,
        ctx: Box::into_raw(Box::new(stage)).cast::<c_void>(),
    }))
}

unsafe extern "C" fn builtin_name(smpl: *const llama_sampler) -> *const c_char {
    // SAFETY: only installed on built-in samplers.
    unsafe { stage(smpl) }.map_or(ptr::null(), |s| s.name().as_ptr())
}

unsafe extern "C" fn builtin_accept(smpl: *mut llama_sampler, token: llama_token) {
    // SAFETY: as above.
    if let Some(s) = unsafe { stage(smpl) } {
        guard("llama_sampler_accept", (), || s.accept(token));
    }
}

unsafe extern "C" fn builtin_apply(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array) {
    // SAFETY: as above; `cur_p` is the caller's live array.
    let (Some(s), Some(arr)) = (unsafe { stage(smpl) }, unsafe { cur_p.as_mut() }) else {
        return;
    };
    // SAFETY: llama.h's array holds `size` candidates at `data`.
    let mut cur = unsafe { Candidates::new(arr) };
    guard("llama_sampler_apply", (), || s.apply(&mut cur));
}

unsafe extern "C" fn builtin_reset(smpl: *mut llama_sampler) {
    // SAFETY: as above.
    if let Some(s) = unsafe { stage(smpl) } {
        guard("llama_sampler_reset", (), || s.reset());
    }
}

unsafe extern "C" fn builtin_clone(smpl: *const llama_sampler) -> *mut llama_sampler {
    // SAFETY: as above.
    let copy = unsafe { stage(smpl) }.and_then(|s| s.clone_stage());
    copy.map_or(ptr::null_mut(), wrap)
}

unsafe extern "C" fn builtin_free(smpl: *mut llama_sampler) {
    // SAFETY: as above; the context is freed once, here, and cleared.
    unsafe {
        if let Some(s) = smpl.as_mut() {
            if !s.ctx.is_null() {
                drop(Box::from_raw(s.ctx.cast::<Boxed>()));
                s.ctx = ptr::null_mut();
            }
        }
    }
}

static BUILTIN: llama_sampler_i = llama_sampler_i {
    name: Some(builtin_name),
    accept: Some(builtin_accept),
    apply: Some(builtin_apply),
    reset: Some(builtin_reset),
    clone: Some(builtin_clone),
    free: Some(builtin_free),
    backend_init: None,
    backend_accept: None,
    backend_apply: None,
    backend_set_input: None,
    backend_reset: None,
    copy_state: None,
};

/// The samplers of a chain, applied in order. Owns them.
pub struct Chain {
    samplers: Vec<*mut llama_sampler>,
    no_perf: bool,
    sample_time: Duration,
    n_sample: i32,
}

// SAFETY: the chain owns its samplers; llama.h makes a sampler single-threaded, and the chain
// moves between threads only with them.
unsafe impl Send for Chain {}

impl Stage for Chain {
    fn name(&self) -> &'static CStr {
        c"chain"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        let started = Instant::now();
        for &s in &self.samplers {
            // SAFETY: samplers added to the chain are live until it frees them.
            unsafe { apply_raw(s, cur.raw()) };
        }
        if !self.no_perf {
            self.sample_time += started.elapsed();
        }
        self.n_sample += 1;
    }
    fn accept(&mut self, token: llama_token) {
        for &s in &self.samplers {
            // SAFETY: as above.
            unsafe { llama_sampler_accept(s, token) };
        }
    }
    fn reset(&mut self) {
        for &s in &self.samplers {
            // SAFETY: as above.
            unsafe { llama_sampler_reset(s) };
        }
    }
    fn seed(&self) -> Option<u32> {
        // The seed of the last sampler that draws, as llama.cpp reports it.
        self.samplers.iter().rev().find_map(|&s| {
            // SAFETY: as above.
            unsafe { stage(s) }.and_then(|st| st.seed())
        })
    }
    fn as_chain(&mut self) -> Option<&mut Chain> {
        Some(self)
    }
}

impl StageClone for Chain {
    fn clone_stage(&self) -> Option<Box<dyn Stage>> {
        let mut copies = Vec::with_capacity(self.samplers.len());
        for &s in &self.samplers {
            // SAFETY: as above.
            let c = unsafe { llama_sampler_clone(s) };
            if c.is_null() {
                for c in copies {
                    // SAFETY: copies made just now.
                    unsafe { llama_sampler_free(c) };
                }
                return None;
            }
            copies.push(c);
        }
        Some(Box::new(Chain {
            samplers: copies,
            no_perf: self.no_perf,
            sample_time: Duration::ZERO,
            n_sample: 0,
        }))
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        for &s in &self.samplers {
            // SAFETY: the chain owns its samplers.
            unsafe { llama_sampler_free(s) };
        }
    }
}

/// # Safety
/// `s` is a live sampler; `arr` a live array.
unsafe fn apply_raw(s: *mut llama_sampler, arr: *mut llama_token_data_array) {
    // SAFETY: the caller's contract.
    unsafe {
        if let Some(apply) = s
            .as_ref()
            .and_then(|s| s.iface.as_ref())
            .and_then(|i| i.apply)
        {
            apply(s, arr);
        }
    }
}

/// # Safety
/// `chain` is NULL or a live sampler.
unsafe fn as_chain<'a>(chain: *const llama_sampler) -> Option<&'a mut Chain> {
    // SAFETY: the caller's contract.
    unsafe { stage(chain) }.and_then(|s| s.as_chain())
}

pub(crate) unsafe fn chain_perf(chain: *const llama_sampler) -> Option<llama_perf_sampler_data> {
    // SAFETY: the caller's contract.
    unsafe { as_chain(chain) }.map(|c| llama_perf_sampler_data {
        t_sample_ms: c.sample_time.as_secs_f64() * 1e3,
        n_sample: c.n_sample,
    })
}

pub(crate) unsafe fn chain_perf_reset(chain: *mut llama_sampler) {
    // SAFETY: the caller's contract.
    if let Some(c) = unsafe { as_chain(chain) } {
        c.sample_time = Duration::ZERO;
        c.n_sample = 0;
    }
}

/// A sampler over the user's interface table and context.
///
/// # Safety
/// `iface` outlives the sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init(
    iface: *const llama_sampler_i,
    ctx: *mut c_void,
) -> *mut llama_sampler {
    Box::into_raw(Box::new(llama_sampler { iface, ctx }))
}

/// # Safety
/// `smpl` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_name(smpl: *const llama_sampler) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe {
        match smpl
            .as_ref()
            .and_then(|s| s.iface.as_ref())
            .and_then(|i| i.name)
        {
            Some(name) => name(smpl),
            None => c"(custom)".as_ptr(),
        }
    }
}

/// # Safety
/// `smpl` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_accept(smpl: *mut llama_sampler, token: llama_token) {
    // SAFETY: the caller's contract.
    unsafe {
        if let Some(accept) = smpl
            .as_ref()
            .and_then(|s| s.iface.as_ref())
            .and_then(|i| i.accept)
        {
            accept(smpl, token);
        }
    }
}

/// # Safety
/// `smpl` is NULL or a live sampler; `cur_p` NULL or a live array.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_apply(
    smpl: *mut llama_sampler,
    cur_p: *mut llama_token_data_array,
) {
    if cur_p.is_null() {
        log::error("llama_sampler_apply: NULL candidates");
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { apply_raw(smpl, cur_p) };
}

/// # Safety
/// `smpl` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_reset(smpl: *mut llama_sampler) {
    // SAFETY: the caller's contract.
    unsafe {
        if let Some(reset) = smpl
            .as_ref()
            .and_then(|s| s.iface.as_ref())
            .and_then(|i| i.reset)
        {
            reset(smpl);
        }
    }
}

/// A copy; NULL (and a log line) for a sampler that cannot be copied.
///
/// # Safety
/// `smpl` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_clone(smpl: *const llama_sampler) -> *mut llama_sampler {
    // SAFETY: the caller's contract.
    unsafe {
        let Some(s) = smpl.as_ref() else {
            return ptr::null_mut();
        };
        match s.iface.as_ref().and_then(|i| i.clone) {
            Some(clone) => clone(smpl),
            // Stateless user samplers are shared as they are, as llama.cpp does.
            None if s.ctx.is_null() => llama_sampler_init(s.iface, ptr::null_mut()),
            None => {
                log::error("llama_sampler_clone: the sampler has state and no clone function");
                ptr::null_mut()
            }
        }
    }
}

/// # Safety
/// `smpl` is NULL or a live sampler, not part of a chain.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_free(smpl: *mut llama_sampler) {
    if smpl.is_null() {
        return;
    }
    // SAFETY: the caller's contract; the struct came from `llama_sampler_init` or `wrap`.
    unsafe {
        if let Some(free) = (*smpl).iface.as_ref().and_then(|i| i.free) {
            free(smpl);
        }
        drop(Box::from_raw(smpl));
    }
}

/// Copies the state of `src` into `dst` (same kind): the copy replaces `dst`'s stage.
///
/// # Safety
/// Both are NULL or live samplers.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_copy(src: *const llama_sampler, dst: *mut llama_sampler) {
    // SAFETY: the caller's contract.
    unsafe {
        let (Some(from), Some(to)) = (stage(src), stage(dst)) else {
            log::once("llama_sampler_copy", "only built-in samplers are copied");
            return;
        };
        match from.clone_stage() {
            Some(copy) => *to = copy,
            None => log::error("llama_sampler_copy: the sampler cannot be copied"),
        }
    }
}

#[no_mangle]
pub extern "C" fn llama_sampler_chain_default_params() -> llama_sampler_chain_params {
    llama_sampler_chain_params { no_perf: true }
}

#[no_mangle]
pub extern "C" fn llama_sampler_chain_init(
    params: llama_sampler_chain_params,
) -> *mut llama_sampler {
    wrap(Box::new(Chain {
        samplers: Vec::new(),
        no_perf: params.no_perf,
        sample_time: Duration::ZERO,
        n_sample: 0,
    }))
}

/// Appends `smpl` to `chain`, which takes it over.
///
/// # Safety
/// Both are NULL or live samplers; `smpl` is in no other chain.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_add(
    chain: *mut llama_sampler,
    smpl: *mut llama_sampler,
) {
    // SAFETY: the caller's contract.
    match unsafe { as_chain(chain) } {
        Some(c) if !smpl.is_null() => c.samplers.push(smpl),
        _ => log::error("llama_sampler_chain_add: not a chain, or a NULL sampler"),
    }
}

/// # Safety
/// `chain` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_get(
    chain: *mut llama_sampler,
    i: i32,
) -> *mut llama_sampler {
    // SAFETY: the caller's contract.
    let c = unsafe { as_chain(chain) };
    c.and_then(|c| {
        usize::try_from(i)
            .ok()
            .and_then(|i| c.samplers.get(i).copied())
    })
    .unwrap_or(ptr::null_mut())
}

/// # Safety
/// `chain` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_n(chain: *const llama_sampler) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { as_chain(chain) }.map_or(-1, |c| c.samplers.len() as i32)
}

/// Takes sampler `i` out of the chain and hands it back to the caller.
///
/// # Safety
/// `chain` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_remove(
    chain: *mut llama_sampler,
    i: i32,
) -> *mut llama_sampler {
    // SAFETY: the caller's contract.
    let c = unsafe { as_chain(chain) };
    match c.and_then(|c| {
        usize::try_from(i)
            .ok()
            .filter(|&i| i < c.samplers.len())
            .map(|i| c.samplers.remove(i))
    }) {
        Some(s) => s,
        None => {
            log::error(&format!("llama_sampler_chain_remove: no sampler {i}"));
            ptr::null_mut()
        }
    }
}

/// # Safety
/// `smpl` is NULL or a live sampler.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_get_seed(smpl: *const llama_sampler) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { stage(smpl) }
        .and_then(|s| s.seed())
        .unwrap_or(LLAMA_DEFAULT_SEED)
}

/// Samples from the logits of batch index `idx` of the last decode: applies `smpl` to the
/// whole vocabulary, accepts the chosen token and returns it (LLAMA_TOKEN_NULL on misuse).
///
/// # Safety
/// `smpl` is NULL or a live sampler; `ctx` NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_sample(
    smpl: *mut llama_sampler,
    ctx: *mut llama_context,
    idx: i32,
) -> llama_token {
    const F: &str = "llama_sampler_sample";
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { crate::guard::handle_mut(F, ctx) }) else {
        return LLAMA_TOKEN_NULL;
    };
    if smpl.is_null() {
        log::error(&format!("{F}: NULL sampler"));
        return LLAMA_TOKEN_NULL;
    }
    let Some(range) = c.logits_range(idx) else {
        log::error(&format!("{F}: no logits for batch index {idx}"));
        return LLAMA_TOKEN_NULL;
    };
    let mut cands = std::mem::take(&mut c.candidates);
    cands.clear();
    cands.extend(
        c.logits[range]
            .iter()
            .enumerate()
            .map(|(id, &logit)| llama_token_data {
                id: id as llama_token,
                logit,
                p: 0.0,
            }),
    );
    let mut arr = llama_token_data_array {
        data: cands.as_mut_ptr(),
        size: cands.len(),
        selected: -1,
        sorted: false,
    };
    // SAFETY: `arr` covers `cands`, alive for the call.
    unsafe { apply_raw(smpl, &mut arr) };
    let chosen = usize::try_from(arr.selected).ok().filter(|&i| i < arr.size);
    // SAFETY: `i` < size, inside the array the samplers left.
    let token = chosen.map(|i| unsafe { (*arr.data.add(i)).id });
    c.candidates = cands;
    let Some(token) = token else {
        log::error(&format!(
            "{F}: the sampler chose no token (end the chain with greedy or dist)"
        ));
        return LLAMA_TOKEN_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe { llama_sampler_accept(smpl, token) };
    token
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_greedy() -> *mut llama_sampler {
    wrap(Box::new(Greedy))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_dist(seed: u32) -> *mut llama_sampler {
    wrap(Box::new(Dist {
        rng: Rng::new(seed),
        seed,
    }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_top_k(k: i32) -> *mut llama_sampler {
    wrap(Box::new(TopK(k)))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_top_p(p: f32, min_keep: usize) -> *mut llama_sampler {
    wrap(Box::new(TopP { p, min_keep }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_min_p(p: f32, min_keep: usize) -> *mut llama_sampler {
    wrap(Box::new(MinP { p, min_keep }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_typical(p: f32, min_keep: usize) -> *mut llama_sampler {
    wrap(Box::new(Typical { p, min_keep }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_temp(t: f32) -> *mut llama_sampler {
    wrap(Box::new(Temp {
        t,
        delta: 0.0,
        exponent: 1.0,
    }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_temp_ext(
    t: f32,
    delta: f32,
    exponent: f32,
) -> *mut llama_sampler {
    wrap(Box::new(Temp { t, delta, exponent }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_xtc(
    p: f32,
    t: f32,
    min_keep: usize,
    seed: u32,
) -> *mut llama_sampler {
    wrap(Box::new(Xtc {
        p,
        t,
        min_keep,
        rng: Rng::new(seed),
        seed,
    }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_top_n_sigma(n: f32) -> *mut llama_sampler {
    wrap(Box::new(TopNSigma(n)))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_mirostat(
    n_vocab: i32,
    seed: u32,
    tau: f32,
    eta: f32,
    m: i32,
) -> *mut llama_sampler {
    wrap(Box::new(Mirostat {
        version: 1,
        n_vocab,
        tau,
        eta,
        m,
        mu: 2.0 * tau,
        rng: Rng::new(seed),
        seed,
    }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_mirostat_v2(
    seed: u32,
    tau: f32,
    eta: f32,
) -> *mut llama_sampler {
    wrap(Box::new(Mirostat {
        version: 2,
        n_vocab: 0,
        tau,
        eta,
        m: 0,
        mu: 2.0 * tau,
        rng: Rng::new(seed),
        seed,
    }))
}

#[no_mangle]
pub extern "C" fn llama_sampler_init_penalties(
    last_n: i32,
    repeat: f32,
    frequency: f32,
    presence: f32,
) -> *mut llama_sampler {
    let last_n = usize::try_from(last_n).unwrap_or(0);
    wrap(Box::new(Penalties {
        last_n,
        repeat,
        frequency,
        presence,
        window: VecDeque::new(),
        counts: HashMap::new(),
    }))
}

/// # Safety
/// `biases` is NULL or holds `n` entries.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_logit_bias(
    _n_vocab: i32,
    n: i32,
    biases: *const llama_logit_bias,
) -> *mut llama_sampler {
    // SAFETY: the caller's contract.
    wrap(Box::new(LogitBias(unsafe { slice(biases, n) }.to_vec())))
}

/// A GBNF grammar sampler; with no grammar text, one that allows everything (as llama.cpp's).
///
/// # Safety
/// `vocab` is NULL or live; the strings are NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_grammar(
    vocab: *const crate::vocab::llama_vocab,
    grammar: *const c_char,
    root: *const c_char,
) -> *mut llama_sampler {
    const F: &str = "llama_sampler_init_grammar";
    // SAFETY: the caller's contract.
    let (text, root) = unsafe { (c_str(grammar), c_str(root)) };
    let text = text.unwrap_or_default();
    if text.trim().is_empty() {
        return wrap(Box::new(LogitBias(Vec::new())));
    }
    // SAFETY: as above.
    let Some(v) = (unsafe { handle(F, vocab) }) else {
        return ptr::null_mut();
    };
    let root = root.unwrap_or(std::borrow::Cow::Borrowed("root"));
    let built = v
        .grammar_compiler()
        .and_then(|c| grammar::Grammar::new(c, &text, &root));
    match built {
        Ok(g) => wrap(Box::new(g)),
        Err(e) => {
            log::error(&format!("{F}: {e}"));
            ptr::null_mut()
        }
    }
}
