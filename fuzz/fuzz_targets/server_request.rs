//! Any request body sent to any endpoint of the HTTP server, in process through its router:
//! an answer (never a panic, never a 500) and, for `/slots`, no file outside the save
//! directory. The server runs over a real model with tiny slots so that a request the fuzzer
//! makes valid still finishes quickly. Needs KOLIBRI_FUZZ_MODEL (a small GGUF such as
//! gemma-3-270m-q4_k_m.gguf).
//!
//! Input: byte 0 picks the endpoint, byte 1 the key header (none, right, wrong), the rest is
//! the body.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use kolibri::batching::{Scheduler, SchedulerParams};
use kolibri::chat::ChatTemplate;
use kolibri::model::{KvType, Model};
use kolibri::server::{router, AppState, Engine, LogOptions, ModelPool};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

const KEY: &str = "fuzz-key";

const ENDPOINTS: &[(&str, &str)] = &[
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("POST", "/v1/embeddings"),
    ("POST", "/tokenize"),
    ("POST", "/detokenize"),
    ("POST", "/api/chat"),
    ("POST", "/api/generate"),
    ("POST", "/api/show"),
    ("POST", "/api/embed"),
    ("POST", "/api/embeddings"),
    ("POST", "/slots/0?action=save"),
    ("POST", "/slots/1?action=restore"),
    ("POST", "/slots/0?action=erase"),
    ("GET", "/v1/models"),
    ("GET", "/metrics"),
    ("POST", "/infill"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/rerank"),
];

struct Server {
    runtime: tokio::runtime::Runtime,
    routes: Router,
    save_dir: PathBuf,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let path = std::env::var("KOLIBRI_FUZZ_MODEL").expect("set KOLIBRI_FUZZ_MODEL");
        let model = Arc::new(Model::load(path).expect("the model loads"));
        let params = SchedulerParams {
            n_slots: 2,
            n_ctx: 48,
            n_threads: 1,
            n_batch: 48,
            max_queue: 4,
            type_k: KvType::F16,
            type_v: KvType::F16,
            context_shift: None,
            speculation: Default::default(),
        };
        let scheduler = Scheduler::start(Arc::clone(&model), params).expect("a scheduler");
        let save_dir = std::env::temp_dir()
            .join(format!("kolibri-fuzz-{}", std::process::id()))
            .join("a/b/slots");
        std::fs::create_dir_all(&save_dir).expect("a slot directory");
        let engine = Engine::new(scheduler, ChatTemplate::from_model(&model), "fuzz".into());
        let app = Arc::new(AppState::new(
            ModelPool::fixed(engine),
            Some(KEY.into()),
            Duration::from_secs(10),
            Some(save_dir.clone()),
        )
        // A line per fuzzed request would be most of the time spent.
        .with_log(LogOptions {
            off: true,
            ..LogOptions::default()
        }));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let routes = router(app, 1 << 20, Duration::from_secs(5));
        Server {
            runtime,
            routes,
            save_dir,
        }
    })
}

/// Entries in the fuzzing root outside the save directory (which sits a few levels down, so a
/// `..` in a slot file name lands in one of them).
fn escaped_files(save_dir: &Path) -> usize {
    fn count(dir: &Path, save_dir: &Path) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p != save_dir)
            .map(|p| {
                if p.is_dir() && save_dir.starts_with(&p) {
                    count(&p, save_dir)
                } else {
                    1
                }
            })
            .sum()
    }
    count(
        save_dir.ancestors().nth(3).expect("the fuzzing root"),
        save_dir,
    )
}

fuzz_target!(|data: &[u8]| {
    let [which, auth, body @ ..] = data else {
        return;
    };
    let server = server();
    let (method, uri) = ENDPOINTS[*which as usize % ENDPOINTS.len()];
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    match auth % 3 {
        0 => {}
        1 => request = request.header("authorization", format!("Bearer {KEY}")),
        _ => request = request.header("authorization", "Bearer not-the-key"),
    }
    let request = request.body(Body::from(body.to_vec())).expect("a request");
    let (status, text) = server.runtime.block_on(async {
        let response = server
            .routes
            .clone()
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        // Streams are read to their end: their errors surface inside the body.
        let bytes = response.into_body().collect().await.map(|b| b.to_bytes());
        (status, bytes)
    });
    assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "{uri}: {text:?}");
    assert!(text.is_ok(), "{uri}: the body failed: {text:?}");
    assert_eq!(
        escaped_files(&server.save_dir),
        0,
        "{uri}: a slot file left its directory"
    );
});
