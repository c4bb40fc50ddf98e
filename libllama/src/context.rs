//! `llama_context`: creation from llama.h's params, `llama_decode` over multi-sequence
//! batches, and the logits and embeddings of the last decode.

use crate::guard::{guard, handle, handle_mut};
use crate::log;
use crate::model::llama_model;
use crate::perf::Perf;
use crate::types::*;
use kolibri::model::{BatchToken, Context, ContextParams, KvType, ModelError, Pooling};
use kolibri::tokenizer::TokenId;
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;
use std::time::Instant;

const VOCAB_ONLY: &str = "the model was loaded with vocab_only: it has no weights to run";

/// llama.cpp's `LLAMA_MAX_SEQ`.
pub const MAX_SEQ: u32 = 256;
/// llama.cpp's `GGML_DEFAULT_N_THREADS`.
const DEFAULT_THREADS: i32 = 4;

pub struct llama_context {
    pub(crate) model: *const llama_model,
    /// The engine's context; `None` over a vocabulary-only model, which tokenizes but has no
    /// weights to run (llama.cpp allows such contexts).
    engine: Option<Context>,
    n_ctx: u32,
    n_batch: u32,
    n_ubatch: u32,
    n_threads: i32,
    n_threads_batch: i32,
    /// llama.h's unified cache: the sequences share `n_ctx` positions between them (each may
    /// reach `n_ctx`; the cache memory is reserved, and only what is written is committed).
    unified: bool,
    /// Logits of the last decode's output tokens, [n_outputs, n_vocab].
    pub(crate) logits: Vec<f32>,
    /// For each token of the last batch, its row in `logits` (-1: none asked).
    output_row: Vec<i32>,
    embeddings: bool,
    pooling: Option<Pooling>,
    /// Per-token hidden states of the last embeddings decode, [n_tokens, n_embd].
    embd: Vec<f32>,
    embd_seq: HashMap<llama_seq_id, Vec<f32>>,
    /// A range removed from the middle of a sequence, waiting for the `llama_memory_seq_add`
    /// that closes it ([`crate::memory`]).
    pub(crate) hole: Option<crate::memory::Hole>,
    pub(crate) perf: Perf,
    /// The candidate list `llama_sampler_sample` builds each token, kept to be refilled.
    pub(crate) candidates: Vec<llama_token_data>,
}

impl llama_context {
    pub(crate) fn n_vocab(&self) -> usize {
        // SAFETY: a context lives no longer than its model (llama.h's rule).
        unsafe { &*self.model }.vocab.tokenizer().n_vocab()
    }

    pub(crate) fn engine(&self) -> Result<&Context, String> {
        self.engine.as_ref().ok_or_else(|| VOCAB_ONLY.to_string())
    }

    /// Sequences the cache holds (none without an engine).
    pub(crate) fn n_seq(&self) -> usize {
        self.engine.as_ref().map_or(0, Context::n_seq)
    }

    /// Tokens sequence `seq` holds (`seq` < [`Self::n_seq`]).
    pub(crate) fn seq_len(&self, seq: usize) -> usize {
        self.engine.as_ref().map_or(0, |e| e.seq_len(seq))
    }

    /// The engine of a context known to have sequences.
    pub(crate) fn kv(&mut self) -> &mut Context {
        self.engine
            .as_mut()
            .expect("only reached with a sequence, so with an engine")
    }

    /// The logits row of batch index `i` (negative: counted from the last output), as
    /// `llama_get_logits_ith` resolves it.
    pub(crate) fn logits_row(&mut self, i: i32) -> Option<&mut [f32]> {
        let range = self.logits_range(i)?;
        Some(&mut self.logits[range])
    }

    /// Where [`Self::logits_row`]'s row lies in `logits`.
    pub(crate) fn logits_range(&self, i: i32) -> Option<std::ops::Range<usize>> {
        let n_vocab = self.n_vocab();
        let n_outputs = (self.logits.len() / n_vocab.max(1)) as i32;
        let row = if i < 0 {
            n_outputs + i
        } else {
            *self.output_row.get(i as usize)?
        };
        if row < 0 || row >= n_outputs {
            return None;
        }
        let start = row as usize * n_vocab;
        Some(start..start + n_vocab)
    }
}

struct AbortHook {
    callback: unsafe extern "C" fn(*mut c_void) -> bool,
    data: *mut c_void,
}

// SAFETY: llama.h documents the abort callback as called from the decoding thread; the user
// data is theirs to make safe for that.
unsafe impl Send for AbortHook {}

impl AbortHook {
    fn ask(&self) -> bool {
        // SAFETY: the user's callback with the data it was registered with.
        unsafe { (self.callback)(self.data) }
    }
}

fn install_abort(ctx: &mut Context, callback: ggml_abort_callback, data: *mut c_void) {
    let hook = callback.map(|callback| AbortHook { callback, data });
    ctx.set_abort(hook.map(|h| Box::new(move || h.ask()) as Box<dyn FnMut() -> bool + Send>));
}

#[no_mangle]
pub extern "C" fn llama_context_default_params() -> llama_context_params {
    llama_context_params {
        n_ctx: 512,
        n_batch: 2048,
        n_ubatch: 512,
        n_seq_max: 1,
        n_rs_seq: 0,
        n_outputs_max: 0,
        n_outputs_max_per_seq: 1,
        n_threads: DEFAULT_THREADS,
        n_threads_batch: DEFAULT_THREADS,
        ctx_type: 0,
        rope_scaling_type: -1,
        pooling_type: LLAMA_POOLING_TYPE_UNSPECIFIED,
        attention_type: -1,
        flash_attn_type: -1,
        rope_freq_base: 0.0,
        rope_freq_scale: 0.0,
        yarn_ext_factor: -1.0,
        yarn_attn_factor: -1.0,
        yarn_beta_fast: -1.0,
        yarn_beta_slow: -1.0,
        yarn_orig_ctx: 0,
        defrag_thold: -1.0,
        cb_eval: None,
        cb_eval_user_data: ptr::null_mut(),
        type_k: GGML_TYPE_F16,
        type_v: GGML_TYPE_F16,
        abort_callback: None,
        abort_callback_data: ptr::null_mut(),
        embeddings: false,
        offload_kqv: true,
        no_perf: true,
        op_offload: true,
        swa_full: true,
        kv_unified: false,
        samplers: ptr::null_mut(),
        n_samplers: 0,
        ctx_other: ptr::null_mut(),
    }
}

fn kv_type(ggml_type: i32, which: &str) -> Result<KvType, String> {
    match ggml_type {
        GGML_TYPE_F16 => Ok(KvType::F16),
        GGML_TYPE_Q8_0 => Ok(KvType::Q8_0),
        GGML_TYPE_Q4_0 => Ok(KvType::Q4_0),
        other => Err(format!(
            "type_{which} {other}: the KV cache holds f16, q8_0 or q4_0"
        )),
    }
}

/// # Safety
/// `model` is NULL or a live model that outlives the context.
#[no_mangle]
pub unsafe extern "C" fn llama_init_from_model(
    model: *mut llama_model,
    params: llama_context_params,
) -> *mut llama_context {
    const F: &str = "llama_init_from_model";
    guard(F, ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let Some(m) = (unsafe { handle(F, model) }) else {
            return ptr::null_mut();
        };
        match create(m, &params) {
            Ok(ctx) => Box::into_raw(Box::new(ctx)),
            Err(e) => {
                log::error(&format!("{F}: {e}"));
                ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// As [`llama_init_from_model`].
#[no_mangle]
pub unsafe extern "C" fn llama_new_context_with_model(
    model: *mut llama_model,
    params: llama_context_params,
) -> *mut llama_context {
    // SAFETY: the same contract.
    unsafe { llama_init_from_model(model, params) }
}

fn create(m: &llama_model, p: &llama_context_params) -> Result<llama_context, String> {
    let Some(engine_model) = &m.engine else {
        return Ok(vocab_only_context(m, p));
    };
    let hp = &engine_model.hparams;
    let n_ctx = if p.n_ctx == 0 {
        hp.n_ctx_train as u32
    } else {
        p.n_ctx
    };
    if n_ctx as usize > hp.n_ctx_train {
        return Err(format!(
            "n_ctx {n_ctx} is past the model's trained context ({})",
            hp.n_ctx_train
        ));
    }
    if p.n_seq_max == 0 || p.n_seq_max > MAX_SEQ {
        return Err(format!(
            "n_seq_max {} must be in 1..={MAX_SEQ}",
            p.n_seq_max
        ));
    }
    if n_ctx < p.n_seq_max {
        return Err(format!(
            "n_ctx {n_ctx} is smaller than n_seq_max {}",
            p.n_seq_max
        ));
    }
    if p.n_samplers > 0 {
        log::once(
            "llama_context_params.samplers",
            "backend samplers are not supported; ignored",
        );
    }
    if p.n_threads != p.n_threads_batch {
        log::once(
            "n_threads_batch",
            "Kolibri uses one thread count per context: the larger of n_threads and n_threads_batch",
        );
    }
    let n_batch = p.n_batch.max(1);
    let params = ContextParams {
        // Separate caches split n_ctx evenly between the sequences, as llama.cpp's do.
        n_ctx: if p.kv_unified {
            n_ctx
        } else {
            n_ctx / p.n_seq_max
        } as usize,
        n_seq: p.n_seq_max as usize,
        n_threads: p.n_threads.max(p.n_threads_batch).max(1) as usize,
        n_batch: p.n_ubatch.clamp(1, n_batch) as usize,
        type_k: kv_type(p.type_k, "k")?,
        type_v: kv_type(p.type_v, "v")?,
    };
    let mut engine =
        Context::new(std::sync::Arc::clone(engine_model), &params).map_err(|e| e.to_string())?;
    install_abort(&mut engine, p.abort_callback, p.abort_callback_data);
    let pooling = match p.pooling_type {
        LLAMA_POOLING_TYPE_NONE => None,
        LLAMA_POOLING_TYPE_MEAN => Some(Pooling::Mean),
        LLAMA_POOLING_TYPE_CLS => Some(Pooling::Cls),
        LLAMA_POOLING_TYPE_LAST => Some(Pooling::Last),
        _ => Some(Pooling::of_model(engine_model)),
    };
    Ok(llama_context {
        model: m,
        engine: Some(engine),
        n_ctx,
        n_batch,
        n_ubatch: params.n_batch as u32,
        n_threads: p.n_threads,
        n_threads_batch: p.n_threads_batch,
        unified: p.kv_unified,
        logits: Vec::new(),
        output_row: Vec::new(),
        embeddings: p.embeddings,
        pooling,
        embd: Vec::new(),
        embd_seq: HashMap::new(),
        hole: None,
        perf: Perf::new(),
        candidates: Vec::new(),
    })
}

/// A context over a vocabulary-only model: queries answer, decoding is refused.
fn vocab_only_context(m: &llama_model, p: &llama_context_params) -> llama_context {
    llama_context {
        model: m,
        engine: None,
        n_ctx: p.n_ctx,
        n_batch: p.n_batch.max(1),
        n_ubatch: p.n_ubatch.clamp(1, p.n_batch.max(1)),
        n_threads: p.n_threads,
        n_threads_batch: p.n_threads_batch,
        unified: p.kv_unified,
        logits: Vec::new(),
        output_row: Vec::new(),
        embeddings: p.embeddings,
        pooling: None,
        embd: Vec::new(),
        embd_seq: HashMap::new(),
        hole: None,
        perf: Perf::new(),
        candidates: Vec::new(),
    }
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_free(ctx: *mut llama_context) {
    if !ctx.is_null() {
        // SAFETY: the caller's contract; the box came from `Box::into_raw`.
        guard("llama_free", (), || drop(unsafe { Box::from_raw(ctx) }));
    }
}

macro_rules! ctx_u32 {
    ($($name:ident => |$c:ident| $e:expr;)*) => {$(
        /// # Safety
        /// `ctx` is NULL or a live context.
        #[no_mangle]
        pub unsafe extern "C" fn $name(ctx: *const llama_context) -> u32 {
            // SAFETY: the caller's contract.
            unsafe { ctx.as_ref() }.map_or(0, |$c| $e)
        }
    )*};
}

ctx_u32! {
    llama_n_ctx => |c| c.n_ctx;
    llama_n_ctx_seq => |c| c.engine.as_ref().map_or(c.n_ctx, |e| e.n_ctx() as u32);
    llama_n_batch => |c| c.n_batch;
    llama_n_ubatch => |c| c.n_ubatch;
    llama_n_seq_max => |c| c.n_seq() as u32;
    llama_n_rs_seq => |_c| 0;
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_get_model(ctx: *const llama_context) -> *const llama_model {
    // SAFETY: the caller's contract.
    unsafe { ctx.as_ref() }.map_or(ptr::null(), |c| c.model)
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_pooling_type(ctx: *const llama_context) -> i32 {
    // SAFETY: the caller's contract.
    match unsafe { ctx.as_ref() }.map(|c| c.pooling) {
        Some(Some(Pooling::Mean)) => LLAMA_POOLING_TYPE_MEAN,
        Some(Some(Pooling::Cls)) => LLAMA_POOLING_TYPE_CLS,
        Some(Some(Pooling::Last)) => LLAMA_POOLING_TYPE_LAST,
        Some(None) => LLAMA_POOLING_TYPE_NONE,
        None => LLAMA_POOLING_TYPE_UNSPECIFIED,
    }
}

/// One pool serves a context: it is sized by the larger of the two counts.
///
/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_set_n_threads(
    ctx: *mut llama_context,
    n_threads: i32,
    n_batch: i32,
) {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { handle_mut("llama_set_n_threads", ctx) }) else {
        return;
    };
    let pool = n_threads.max(n_batch).max(1) as usize;
    if let Some(engine) = &mut c.engine {
        if let Err(e) = engine.set_threads(pool) {
            log::error(&format!("llama_set_n_threads: {e}"));
            return;
        }
    }
    c.n_threads = n_threads;
    c.n_threads_batch = n_batch;
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_n_threads(ctx: *mut llama_context) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { ctx.as_ref() }.map_or(0, |c| c.n_threads)
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_n_threads_batch(ctx: *mut llama_context) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { ctx.as_ref() }.map_or(0, |c| c.n_threads_batch)
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_set_embeddings(ctx: *mut llama_context, embeddings: bool) {
    // SAFETY: the caller's contract.
    if let Some(c) = unsafe { handle_mut("llama_set_embeddings", ctx) } {
        c.embeddings = embeddings;
    }
}

/// # Safety
/// `ctx` is NULL or a live context; the callback stays callable with `data` meanwhile.
#[no_mangle]
pub unsafe extern "C" fn llama_set_abort_callback(
    ctx: *mut llama_context,
    callback: ggml_abort_callback,
    data: *mut c_void,
) {
    // SAFETY: the caller's contract.
    if let Some(c) = unsafe { handle_mut("llama_set_abort_callback", ctx) } {
        if let Some(engine) = &mut c.engine {
            install_abort(engine, callback, data);
        }
    }
}

/// Decoding is synchronous: nothing to wait for.
///
/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_synchronize(_ctx: *mut llama_context) {}

/// Reads and checks a llama.h batch: every token in one known sequence at the position that
/// sequence continues from. Errors name the token.
fn plan(ctx: &llama_context, batch: &llama_batch) -> Result<Vec<BatchToken>, String> {
    let n = batch.n_tokens as usize;
    let n_seq = ctx.n_seq();
    let mut next_pos: Vec<usize> = (0..n_seq).map(|s| ctx.seq_len(s)).collect();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY (all reads below): llama.h's batch holds n_tokens entries in each non-NULL
        // array, and n_seq_id[i] ids behind seq_id[i].
        let token = unsafe { *batch.token.add(i) };
        let seq = if batch.seq_id.is_null() || batch.n_seq_id.is_null() {
            0
        } else {
            let n_ids = unsafe { *batch.n_seq_id.add(i) };
            if n_ids != 1 {
                return Err(format!(
                    "token {i} belongs to {n_ids} sequences; Kolibri takes exactly one per token"
                ));
            }
            unsafe { **batch.seq_id.add(i) }
        };
        let Some(seq_index) = usize::try_from(seq).ok().filter(|&s| s < n_seq) else {
            return Err(format!("token {i}: sequence id {seq} is not in 0..{n_seq}"));
        };
        if !batch.pos.is_null() {
            let pos = unsafe { *batch.pos.add(i) };
            if usize::try_from(pos).ok() != Some(next_pos[seq_index]) {
                return Err(format!(
                    "token {i}: position {pos} of sequence {seq}, which continues at {} \
                     (a position gap or overlap)",
                    next_pos[seq_index]
                ));
            }
        }
        next_pos[seq_index] += 1;
        let logits = if batch.logits.is_null() {
            i + 1 == n
        } else {
            unsafe { *batch.logits.add(i) != 0 }
        };
        let Ok(token) = TokenId::try_from(token) else {
            return Err(format!("token {i}: id {token} is negative"));
        };
        out.push(BatchToken {
            token,
            seq: seq_index,
            logits,
        });
    }
    Ok(out)
}

/// llama.h's return codes: 0 done, 1 no room in the cache, 2 aborted, -1 bad input.
pub(crate) fn decode(ctx: &mut llama_context, batch: &llama_batch) -> i32 {
    const F: &str = "llama_decode";
    if batch.n_tokens <= 0 || batch.token.is_null() {
        log::error(&format!(
            "{F}: the batch holds no tokens (embeddings input is not supported)"
        ));
        return -1;
    }
    if batch.n_tokens as u32 > ctx.n_batch {
        log::error(&format!(
            "{F}: {} tokens exceed n_batch {}",
            batch.n_tokens, ctx.n_batch
        ));
        return -1;
    }
    if ctx.engine.is_none() {
        log::error(&format!("{F}: {VOCAB_ONLY}"));
        return -1;
    }
    if let Some(hole) = &ctx.hole {
        log::error(&format!(
            "{F}: positions {}..{} of sequence {} were removed and not closed by llama_memory_seq_add",
            hole.p0, hole.p1, hole.seq
        ));
        return -1;
    }
    let tokens = match plan(ctx, batch) {
        Ok(p) => p,
        Err(e) => {
            log::error(&format!("{F}: {e}"));
            return -1;
        }
    };
    let held: usize = (0..ctx.n_seq()).map(|s| ctx.seq_len(s)).sum();
    if ctx.unified && held + tokens.len() > ctx.n_ctx as usize {
        log::warn(&format!("{F}: the batch does not fit in the context"));
        return 1;
    }
    let started = Instant::now();
    let result = if ctx.embeddings {
        embed(ctx, &tokens)
    } else {
        ctx.kv().decode(&tokens).map(|logits| {
            let mut row = 0;
            ctx.output_row = tokens
                .iter()
                .map(|t| {
                    let r = if t.logits { row } else { -1 };
                    row += i32::from(t.logits);
                    r
                })
                .collect();
            ctx.logits = logits;
        })
    };
    ctx.perf.count_decode(tokens.len(), started.elapsed());
    match result {
        Ok(()) => 0,
        Err(ModelError::ContextFull { .. }) => {
            log::warn(&format!("{F}: the batch does not fit in the context"));
            1
        }
        Err(ModelError::Cancelled) => 2,
        Err(e) => {
            log::error(&format!("{F}: {e}"));
            -1
        }
    }
}

/// Embeddings mode: each sequence in the batch is embedded whole (from its first position),
/// its token vectors kept for `llama_get_embeddings_ith` and its pooled vector for
/// `llama_get_embeddings_seq`.
fn embed(ctx: &mut llama_context, tokens: &[BatchToken]) -> Result<(), ModelError> {
    let n_embd = ctx.kv().model().hparams.n_embd;
    let mut seqs: Vec<usize> = tokens.iter().map(|t| t.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    ctx.embd = vec![0.0; tokens.len() * n_embd];
    ctx.embd_seq.clear();
    for seq in seqs {
        if ctx.seq_len(seq) != 0 {
            return Err(ModelError::InvalidArgument(format!(
                "embeddings: sequence {seq} must be cleared before it is embedded again"
            )));
        }
        let rows: Vec<usize> = (0..tokens.len())
            .filter(|&i| tokens[i].seq == seq)
            .collect();
        let ids: Vec<TokenId> = rows.iter().map(|&i| tokens[i].token).collect();
        let hidden = ctx.kv().embed(seq, &ids)?;
        for (k, &i) in rows.iter().enumerate() {
            ctx.embd[i * n_embd..(i + 1) * n_embd]
                .copy_from_slice(&hidden[k * n_embd..(k + 1) * n_embd]);
        }
        if let Some(pooling) = ctx.pooling {
            ctx.embd_seq
                .insert(seq as llama_seq_id, pooling.pool(&hidden, n_embd));
        }
    }
    ctx.output_row = (0..tokens.len() as i32).collect();
    ctx.logits.clear();
    Ok(())
}

/// # Safety
/// `ctx` is NULL or a live context; `batch`'s arrays hold `n_tokens` entries each.
#[no_mangle]
pub unsafe extern "C" fn llama_decode(ctx: *mut llama_context, batch: llama_batch) -> i32 {
    // SAFETY: the caller's contract.
    match unsafe { handle_mut("llama_decode", ctx) } {
        Some(c) => guard("llama_decode", -1, || decode(c, &batch)),
        None => -1,
    }
}

/// Encoder-decoder models are not supported; decoder-only models encode by decoding.
///
/// # Safety
/// As [`llama_decode`].
#[no_mangle]
pub unsafe extern "C" fn llama_encode(ctx: *mut llama_context, batch: llama_batch) -> i32 {
    // SAFETY: the same contract.
    unsafe { llama_decode(ctx, batch) }
}

/// # Safety
/// `ctx` is NULL or a live context. The pointer is valid until the next decode.
#[no_mangle]
pub unsafe extern "C" fn llama_get_logits(ctx: *mut llama_context) -> *mut f32 {
    // SAFETY: the caller's contract.
    match unsafe { handle_mut("llama_get_logits", ctx) } {
        Some(c) if !c.logits.is_empty() => c.logits.as_mut_ptr(),
        _ => ptr::null_mut(),
    }
}

/// # Safety
/// As [`llama_get_logits`].
#[no_mangle]
pub unsafe extern "C" fn llama_get_logits_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { handle_mut("llama_get_logits_ith", ctx) }) else {
        return ptr::null_mut();
    };
    match c.logits_row(i) {
        Some(row) => row.as_mut_ptr(),
        None => {
            log::error(&format!(
                "llama_get_logits_ith: no logits for batch index {i}"
            ));
            ptr::null_mut()
        }
    }
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings(ctx: *mut llama_context) -> *mut f32 {
    // SAFETY: the caller's contract.
    match unsafe { handle_mut("llama_get_embeddings", ctx) } {
        Some(c) if !c.embd.is_empty() => c.embd.as_mut_ptr(),
        _ => ptr::null_mut(),
    }
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { handle_mut("llama_get_embeddings_ith", ctx) }) else {
        return ptr::null_mut();
    };
    let Ok(engine) = c.engine() else {
        return ptr::null_mut();
    };
    let n_embd = engine.model().hparams.n_embd;
    let n_rows = (c.embd.len() / n_embd.max(1)) as i32;
    let row = if i < 0 { n_rows + i } else { i };
    if row < 0 || row >= n_rows {
        log::error(&format!(
            "llama_get_embeddings_ith: no embeddings for index {i}"
        ));
        return ptr::null_mut();
    }
    c.embd[row as usize * n_embd..].as_mut_ptr()
}

/// # Safety
/// `ctx` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings_seq(
    ctx: *mut llama_context,
    seq: llama_seq_id,
) -> *mut f32 {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { handle_mut("llama_get_embeddings_seq", ctx) }) else {
        return ptr::null_mut();
    };
    c.embd_seq
        .get_mut(&seq)
        .map_or(ptr::null_mut(), |v| v.as_mut_ptr())
}
