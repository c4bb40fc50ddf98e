//! `llama_vocab`: token queries, tokenize, token_to_piece and detokenize.

use crate::guard::{guard, slice};
use crate::log;
use crate::types::*;
use kolibri::grammar::GrammarCompiler;
use kolibri::model::Model;
use kolibri::tokenizer::{TokenId, Tokenizer};
use std::ffi::{c_char, CString};
use std::ptr;
use std::sync::{Arc, OnceLock};

/// Where the tokenizer lives: inside the engine model, or alone for a vocabulary-only load.
pub enum Source {
    Model(Arc<Model>),
    Alone(Box<Tokenizer>),
}

pub struct llama_vocab {
    source: Source,
    /// Token texts as C strings, built on first `llama_vocab_get_text` (pointers stay valid
    /// while the model lives).
    texts: OnceLock<Vec<CString>>,
    /// The vocabulary as the grammar engine sees it, built for the first grammar sampler.
    grammar: OnceLock<Result<GrammarCompiler, String>>,
}

impl llama_vocab {
    pub fn new(source: Source) -> llama_vocab {
        llama_vocab {
            source,
            texts: OnceLock::new(),
            grammar: OnceLock::new(),
        }
    }

    pub fn grammar_compiler(&self) -> Result<&GrammarCompiler, String> {
        self.grammar
            .get_or_init(|| GrammarCompiler::new(self.tokenizer()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        match &self.source {
            Source::Model(m) => &m.tokenizer,
            Source::Alone(t) => t,
        }
    }

    /// `token` as an id of this vocabulary.
    pub fn id(&self, token: llama_token) -> Option<TokenId> {
        let id = TokenId::try_from(token).ok()?;
        ((id as usize) < self.tokenizer().n_vocab()).then_some(id)
    }
}

fn id_or_null(id: Option<TokenId>) -> llama_token {
    id.map_or(LLAMA_TOKEN_NULL, |id| id as llama_token)
}

/// # Safety
/// `vocab` is NULL or a live vocabulary.
unsafe fn with_vocab<T>(
    vocab: *const llama_vocab,
    failure: T,
    f: impl FnOnce(&llama_vocab) -> T,
) -> T {
    // SAFETY: the caller's contract.
    match unsafe { vocab.as_ref() } {
        Some(v) => guard("llama_vocab", failure, || f(v)),
        None => {
            log::error("llama_vocab: NULL vocabulary");
            failure
        }
    }
}

macro_rules! vocab_token {
    ($($name:ident => |$t:ident| $e:expr;)*) => {$(
        /// # Safety
        /// `vocab` is NULL or a live vocabulary.
        #[no_mangle]
        pub unsafe extern "C" fn $name(vocab: *const llama_vocab) -> llama_token {
            // SAFETY: the caller's contract.
            unsafe { with_vocab(vocab, LLAMA_TOKEN_NULL, |v| { let $t = v.tokenizer(); id_or_null($e) }) }
        }
    )*};
}

vocab_token! {
    llama_vocab_bos => |t| t.bos();
    llama_vocab_eos => |t| t.eos();
    llama_vocab_eot => |t| t.specials().eot;
    llama_vocab_sep => |t| t.sep();
    llama_vocab_nl => |t| t.newline();
    llama_vocab_pad => |t| t.specials().pad;
    llama_vocab_mask => |_t| None;
    llama_vocab_cls => |t| t.bos();
    llama_vocab_fim_pre => |t| t.specials().fim_pre;
    llama_vocab_fim_suf => |t| t.specials().fim_suf;
    llama_vocab_fim_mid => |t| t.specials().fim_mid;
    llama_vocab_fim_pad => |t| t.specials().fim_pad;
    llama_vocab_fim_rep => |t| t.specials().fim_rep;
    llama_vocab_fim_sep => |t| t.specials().fim_sep;
    llama_token_bos => |t| t.bos();
    llama_token_eos => |t| t.eos();
    llama_token_eot => |t| t.specials().eot;
    llama_token_cls => |t| t.bos();
    llama_token_sep => |t| t.sep();
    llama_token_nl => |t| t.newline();
    llama_token_pad => |t| t.specials().pad;
    llama_token_fim_pre => |t| t.specials().fim_pre;
    llama_token_fim_suf => |t| t.specials().fim_suf;
    llama_token_fim_mid => |t| t.specials().fim_mid;
    llama_token_fim_pad => |t| t.specials().fim_pad;
    llama_token_fim_rep => |t| t.specials().fim_rep;
    llama_token_fim_sep => |t| t.specials().fim_sep;
}

macro_rules! vocab_flag {
    ($($name:ident => |$t:ident| $e:expr;)*) => {$(
        /// # Safety
        /// `vocab` is NULL or a live vocabulary.
        #[no_mangle]
        pub unsafe extern "C" fn $name(vocab: *const llama_vocab) -> bool {
            // SAFETY: the caller's contract.
            unsafe { with_vocab(vocab, false, |v| { let $t = v.tokenizer(); $e }) }
        }
    )*};
}

vocab_flag! {
    llama_vocab_get_add_bos => |t| t.add_bos();
    llama_vocab_get_add_eos => |t| t.add_eos();
    llama_vocab_get_add_sep => |t| t.add_sep();
    llama_add_bos_token => |t| t.add_bos();
    llama_add_eos_token => |t| t.add_eos();
}

/// # Safety
/// `vocab` is NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_type(vocab: *const llama_vocab) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_vocab(vocab, 0, |v| match v.tokenizer().model_name() {
            "llama" => LLAMA_VOCAB_TYPE_SPM,
            "gpt2" => LLAMA_VOCAB_TYPE_BPE,
            _ => LLAMA_VOCAB_TYPE_WPM,
        })
    }
}

/// # Safety
/// `vocab` is NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_n_tokens(vocab: *const llama_vocab) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { with_vocab(vocab, 0, |v| v.tokenizer().n_vocab() as i32) }
}

/// # Safety
/// As [`llama_vocab_n_tokens`].
#[no_mangle]
pub unsafe extern "C" fn llama_n_vocab(vocab: *const llama_vocab) -> i32 {
    // SAFETY: the same contract.
    unsafe { llama_vocab_n_tokens(vocab) }
}

/// # Safety
/// `vocab` is NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_text(
    vocab: *const llama_vocab,
    token: llama_token,
) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe {
        with_vocab(vocab, ptr::null(), |v| {
            let Some(id) = v.id(token) else {
                log::error(&format!("llama_vocab_get_text: token {token} out of range"));
                return ptr::null();
            };
            let texts = v.texts.get_or_init(|| {
                let t = v.tokenizer();
                (0..t.n_vocab() as TokenId)
                    .map(|id| CString::new(t.token_text(id).unwrap_or_default().replace('\0', "")))
                    .map(|s| s.unwrap_or_default())
                    .collect()
            });
            texts[id as usize].as_ptr()
        })
    }
}

/// # Safety
/// `vocab` is NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_score(
    vocab: *const llama_vocab,
    token: llama_token,
) -> f32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_vocab(vocab, 0.0, |v| {
            v.id(token).map_or(0.0, |id| v.tokenizer().score(id))
        })
    }
}

/// `enum llama_token_attr` of a token: its type bit plus the strip flags.
///
/// # Safety
/// `vocab` is NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_attr(
    vocab: *const llama_vocab,
    token: llama_token,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_vocab(vocab, 0, |v| {
            let Some((kind, lstrip, rstrip)) =
                v.id(token).and_then(|id| v.tokenizer().token_type(id))
            else {
                return 0;
            };
            // GGUF types 1..=6 map to attribute bits normal, unknown, control, user-defined,
            // unused, byte.
            let kind_bit = match kind {
                1 => 1 << 2,
                2 => 1 << 0,
                3 => 1 << 3,
                4 => 1 << 4,
                5 => 1 << 1,
                6 => 1 << 5,
                _ => 0,
            };
            kind_bit | if lstrip { 1 << 7 } else { 0 } | if rstrip { 1 << 8 } else { 0 }
        })
    }
}

/// # Safety
/// `vocab` is NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_is_eog(vocab: *const llama_vocab, token: llama_token) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        with_vocab(vocab, false, |v| {
            v.id(token).is_some_and(|id| v.tokenizer().is_eog(id))
        })
    }
}

/// # Safety
/// `vocab` is NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_is_control(
    vocab: *const llama_vocab,
    token: llama_token,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        with_vocab(vocab, false, |v| {
            v.id(token).is_some_and(|id| v.tokenizer().is_control(id))
        })
    }
}

/// # Safety
/// `vocab` is NULL or a live vocabulary; `n` writable or NULL.
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_suppress_tokens(
    vocab: *const llama_vocab,
    n: *mut i32,
) -> *const llama_token {
    // The file's `tokenizer.ggml.suppress_tokens`, in range and sorted; they live as long as
    // the vocabulary. Ids are below n_vocab (an i32), so u32 and i32 hold the same bits.
    // SAFETY: the caller's contract.
    let (ptr, len) = unsafe {
        with_vocab(vocab, (ptr::null(), 0), |v| {
            let ids = v.tokenizer().suppressed();
            (ids.as_ptr().cast::<llama_token>(), ids.len())
        })
    };
    // SAFETY: the caller's contract.
    if let Some(n) = unsafe { n.as_mut() } {
        *n = i32::try_from(len).unwrap_or(i32::MAX);
    }
    if len == 0 {
        ptr::null()
    } else {
        ptr
    }
}

macro_rules! deprecated_alias {
    ($($old:ident => $new:ident -> $ret:ty;)*) => {$(
        /// # Safety
        /// As the function it stands for.
        #[no_mangle]
        pub unsafe extern "C" fn $old(vocab: *const llama_vocab, token: llama_token) -> $ret {
            // SAFETY: the same contract.
            unsafe { $new(vocab, token) }
        }
    )*};
}

deprecated_alias! {
    llama_token_get_text => llama_vocab_get_text -> *const c_char;
    llama_token_get_score => llama_vocab_get_score -> f32;
    llama_token_get_attr => llama_vocab_get_attr -> i32;
    llama_token_is_eog => llama_vocab_is_eog -> bool;
    llama_token_is_control => llama_vocab_is_control -> bool;
}

/// Tokens of `text` (`text_len` bytes, no NUL needed): their count, or minus the count
/// when more than `n_tokens_max` (nothing written then).
///
/// # Safety
/// `vocab` is NULL or live; `text` readable for `text_len` bytes; `tokens` writable for
/// `n_tokens_max` ids.
#[no_mangle]
pub unsafe extern "C" fn llama_tokenize(
    vocab: *const llama_vocab,
    text: *const c_char,
    text_len: i32,
    tokens: *mut llama_token,
    n_tokens_max: i32,
    add_special: bool,
    parse_special: bool,
) -> i32 {
    // SAFETY: the caller's contract.
    let bytes = unsafe { slice(text.cast::<u8>(), text_len) };
    // SAFETY: as above.
    unsafe {
        with_vocab(vocab, i32::MIN, |v| {
            let text = String::from_utf8_lossy(bytes);
            let ids = v.tokenizer().encode(&text, add_special, parse_special);
            let n = i32::try_from(ids.len()).unwrap_or(i32::MAX);
            if n > n_tokens_max || (tokens.is_null() && n > 0) {
                return -n;
            }
            for (i, &id) in ids.iter().enumerate() {
                // SAFETY: n <= n_tokens_max slots are writable.
                *tokens.add(i) = id as llama_token;
            }
            n
        })
    }
}

/// Copies `bytes` into `buf` whole, or returns minus their length when it does not fit.
unsafe fn write_bytes(buf: *mut c_char, capacity: i32, bytes: &[u8]) -> i32 {
    let n = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
    if n > capacity || (buf.is_null() && n > 0) {
        return -n;
    }
    // SAFETY: the caller's buffer holds `capacity` >= n bytes.
    unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len()) };
    n
}

/// The bytes one token writes (not NUL-terminated), `lstrip` leading spaces removed; minus
/// the length when `length` is too small.
///
/// # Safety
/// `vocab` is NULL or live; `buf` writable for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_token_to_piece(
    vocab: *const llama_vocab,
    token: llama_token,
    buf: *mut c_char,
    length: i32,
    lstrip: i32,
    special: bool,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_vocab(vocab, 0, |v| {
            let Some(id) = v.id(token) else {
                log::error(&format!("llama_token_to_piece: token {token} out of range"));
                return 0;
            };
            let piece = v.tokenizer().token_bytes(id, special);
            let spaces = piece
                .iter()
                .take(lstrip.max(0) as usize)
                .take_while(|&&b| b == b' ');
            let skip = spaces.count();
            write_bytes(buf, length, &piece[skip..])
        })
    }
}

/// The text of `tokens`; `remove_special` drops a leading BOS and trailing EOS the vocabulary
/// adds, `unparse_special` renders control tokens. Minus the length when it does not fit.
///
/// # Safety
/// `vocab` is NULL or live; `tokens` readable for `n_tokens`; `text` writable for
/// `text_len_max` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_detokenize(
    vocab: *const llama_vocab,
    tokens: *const llama_token,
    n_tokens: i32,
    text: *mut c_char,
    text_len_max: i32,
    remove_special: bool,
    unparse_special: bool,
) -> i32 {
    // SAFETY: the caller's contract.
    let tokens = unsafe { slice(tokens, n_tokens) };
    // SAFETY: as above.
    unsafe {
        with_vocab(vocab, i32::MIN, |v| {
            let t = v.tokenizer();
            let mut ids: Vec<TokenId> = tokens.iter().filter_map(|&tok| v.id(tok)).collect();
            // llama.cpp keeps the leading space of the text after a BOS it removed.
            let mut at_start = true;
            if remove_special && t.add_bos() && !ids.is_empty() && ids.first() == t.bos().as_ref() {
                ids.remove(0);
                at_start = false;
            }
            if remove_special && t.add_eos() && ids.last() == t.eos().as_ref() {
                ids.pop();
            }
            write_bytes(
                text,
                text_len_max,
                &t.detokenize(&ids, unparse_special, at_start),
            )
        })
    }
}
