//! Any bytes given to a context as a saved state: refused with an error (the context as it
//! was) or loaded, never a panic. Needs a model: KOLIBRI_FUZZ_MODEL (a small GGUF such as
//! gemma-3-270m-q4_k_m.gguf).
#![no_main]

use std::io::Cursor;
use std::sync::{Arc, Mutex, OnceLock};

use kolibri::model::{Context, ContextParams, Model};
use libfuzzer_sys::fuzz_target;

fn context() -> &'static Mutex<Context> {
    static CTX: OnceLock<Mutex<Context>> = OnceLock::new();
    CTX.get_or_init(|| {
        let path = std::env::var("KOLIBRI_FUZZ_MODEL").expect("set KOLIBRI_FUZZ_MODEL");
        let model = Arc::new(Model::load(path).expect("the model loads"));
        let params = ContextParams {
            n_ctx: 64,
            n_threads: 1,
            ..ContextParams::default()
        };
        Mutex::new(Context::new(model, &params).expect("a context"))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut ctx = context().lock().unwrap_or_else(|p| p.into_inner());
    let before = ctx.seq_len(0);
    if ctx.load_seq(0, &mut Cursor::new(data)).is_err() {
        assert_eq!(
            ctx.seq_len(0),
            before,
            "a refused state changed the context"
        );
    }
});
