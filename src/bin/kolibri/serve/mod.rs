//! `kolibri serve`: the command line of [`kolibri::server`]. Binds 127.0.0.1 by default and
//! warns when bound elsewhere without a key.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use kolibri::batching::{Scheduler, SchedulerParams, Speculation};
use kolibri::chat::ChatTemplate;
use kolibri::server::{
    listener, router, AppState, Engine, Loader, LogFormat, LogOptions, ModelPool, ThinkingOptions,
};

use crate::args::Args;

pub const USAGE: &str =
    "  kolibri serve [-m MODEL] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel 4]
              [-c CTX_PER_SLOT] [-t THREADS] [--alias NAME] [--queue 64] [--timeout SECS]
              [--max-body BYTES] [--max-connections 1024] [--conn-timeout SECS]
              [--chat-template-file FILE] [--chat-template-kwargs JSON]
              [--reasoning-format auto|none] [--reasoning-budget N]
              [-ctk TYPE] [-ctv TYPE] [--no-mmap] [--mlock]
              [--context-shift [--keep N]] [--slot-save-path DIR] [--mem-budget SIZE | --fit]
              [--lookup] [--draft MODEL | --spec mtp | --draft-assistant FILE]
              [--draft-max 16] [--draft-p-min 0.5]
              [--models-max 1] [--idle-unload 300] [-v] [--log-format text|json] [--log-disable]
              (a line per request on stderr: client, method, path, status, time, and a
              generation's prompt, cached and generated tokens, time to first token and
              tokens/s; never the key or the body, which -v adds (its first 2 KiB);
              without -m, every model `kolibri list` shows is served by name, loaded when a
              request names it: at most --models-max at once, the least recently used making
              room, each unloaded after --idle-unload seconds without requests (0: never);
              the key can also come from KOLIBRI_API_KEY;
              --context-shift lets a request generate past its slot's context, forgetting the
              older half of what follows its first N tokens each time the slot is full;
              --slot-save-path enables POST /slots/ID?action=save|restore|erase with
              {\"filename\": NAME}: a slot's tokens and KV cache to DIR/NAME and back;
              --lookup, --draft, --spec mtp and --draft-assistant make each slot draft tokens,
              from its own and earlier requests' text, from a small model of the same
              vocabulary, from the model's own multi-token-prediction block or from a Gemma 4
              model's assistant, that the shared forward pass checks:
              greedy output stays the same, only faster)
";

/// The request log's settings: `-v` (`--verbose`) for the user agent and the body, `--log-format
/// text|json`, llama.cpp's `--log-disable` for none.
fn log_options(a: &Args) -> Result<LogOptions, String> {
    let format = match a.get(&["--log-format"]).unwrap_or("text") {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => return Err(format!("--log-format {other:?}: text or json")),
    };
    Ok(LogOptions {
        format,
        verbose: a.has("--verbose"),
        off: a.has("--log-disable"),
    })
}

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "serve",
        raw,
        &[
            "-m",
            "--model",
            "-hf",
            "--hf-repo",
            "--host",
            "--port",
            "--api-key",
            "--parallel",
            "-np",
            "-c",
            "--ctx-size",
            "-t",
            "--threads",
            "--alias",
            "--queue",
            "--timeout",
            "--max-body",
            "-b",
            "--batch-size",
            "--keep",
            "--draft-max",
            "--draft-p-min",
            "-md",
            "--draft",
            "--draft-assistant",
            "--spec",
            "--spec-type",
            "--slot-save-path",
            "--conn-timeout",
            "--max-connections",
            "--chat-template-file",
            "--chat-template-kwargs",
            "--reasoning-format",
            "--reasoning-budget",
            "--models-max",
            "--idle-unload",
            "--log-format",
        ]
        .into_iter()
        .chain(crate::KV_TYPE_FLAGS)
        .chain(crate::BUDGET_FLAGS)
        .collect::<Vec<_>>(),
        &[
            &crate::LOAD_SWITCHES[..],
            &crate::BUDGET_SWITCHES,
            &["--context-shift", "--lookup", "--verbose", "--log-disable"],
        ]
        .concat(),
    )?;
    let host: IpAddr = a
        .parse_or(&["--host"], IpAddr::from([127, 0, 0, 1]))
        .map_err(|e| format!("{e} (an IP address such as 127.0.0.1 or 0.0.0.0)"))?;
    let port: u16 = a.parse_or(&["--port"], 8080)?;
    let api_key = a
        .get(&["--api-key"])
        .map(str::to_string)
        .or_else(|| std::env::var("KOLIBRI_API_KEY").ok())
        .filter(|k| !k.is_empty());
    let n_threads: usize = a.parse_or(&["-t", "--threads"], crate::default_threads())?;
    // Checked now, though an on-demand server reads them again per model.
    a.parse_or::<usize>(&["--parallel", "-np"], 4)?;
    a.parse_or::<usize>(&["--queue"], 64)?;
    a.parse_or::<usize>(&["-b", "--batch-size"], 512)?;
    crate::kv_types(&a)?;
    let timeout: u64 = a.parse_or(&["--timeout"], 600)?;
    let max_body: usize = a.parse_or(&["--max-body"], 4 << 20)?;
    let limits = listener::Limits {
        max_connections: a.parse_or(&["--max-connections"], 1024)?,
        read_timeout: Duration::from_secs_f64(a.parse_or(&["--conn-timeout"], 10.0)?),
    };
    if limits.max_connections == 0 || limits.read_timeout.is_zero() {
        return Err("--max-connections and --conn-timeout must be above 0".into());
    }
    let slot_save_path = a.get(&["--slot-save-path"]).map(std::path::PathBuf::from);
    if let Some(dir) = &slot_save_path {
        if !dir.is_dir() {
            return Err(format!(
                "--slot-save-path {}: not a directory (create it first)",
                dir.display()
            ));
        }
    }

    let thinking = thinking_options(&a)?;
    let log = log_options(&a)?;
    let a = Arc::new(a);
    let (pool, serving) = if a.model().is_some() || a.get(&crate::MODEL_FLAGS).is_some() {
        let path = crate::model_path(&a)?;
        // `-m NAME` of a stored model is served under that name, not its file's.
        let stored_name = a.model().filter(|m| !std::path::Path::new(m).exists());
        let model_id = a
            .get(&["--alias"])
            .or(stored_name)
            .map(str::to_string)
            .unwrap_or_else(|| {
                let name = crate::store::file_name(&path);
                name.strip_suffix(".gguf").unwrap_or(&name).to_string()
            });
        let engine = engine(&path, model_id, &a)?;
        let facts = kolibri::store::ModelFacts::of(&engine.scheduler.model().gguf);
        eprintln!("kolibri serve: {}: {facts}", engine.model_id);
        let serving = format!(
            "model {}, {} slots x {} tokens",
            engine.model_id,
            engine.scheduler.params().n_slots,
            engine.scheduler.params().n_ctx
        );
        (ModelPool::fixed(engine), serving)
    } else {
        on_demand(&a)?
    };
    let app = Arc::new(
        AppState::new(
            pool,
            api_key.clone(),
            Duration::from_secs(timeout),
            slot_save_path,
        )
        .with_thinking(thinking)
        .with_log(log),
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("kolibri-http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    let result = runtime.block_on(async {
        let addr = SocketAddr::new(host, port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        if !host.is_loopback() && api_key.is_none() {
            eprintln!(
                "warning: listening on {bound} without an API key: anyone who can reach this \
                 address can use the model (set --api-key or KOLIBRI_API_KEY)"
            );
        }
        if let ModelPool::Fixed(e) = &app.pool {
            if let Err(e) = &e.template {
                eprintln!("note: /v1/chat/completions will answer 400: {e}");
            }
        }
        if let ModelPool::OnDemand(_) = &app.pool {
            tokio::spawn(unload_idle(Arc::clone(&app)));
        }
        println!("kolibri serve: listening on http://{bound} ({serving}, {n_threads} threads)");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let routes = router(Arc::clone(&app), max_body, limits.read_timeout);
        listener::serve(
            listener,
            routes,
            limits,
            Arc::clone(&app),
            shutdown_signal(),
        )
        .await;
        Ok::<(), String>(())
    });
    // Handlers are gone; dropping the last reference stops the scheduler thread.
    drop(runtime);
    drop(app);
    result
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminate = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
    eprintln!("kolibri serve: shutting down");
}

/// The engine serving the model at `path` as `model_id`, with the command line's settings.
fn engine(path: &str, model_id: String, a: &Args) -> Result<Engine, String> {
    let n_slots: usize = a.parse_or(&["--parallel", "-np"], 4)?;
    let n_batch: usize = a.parse_or(&["-b", "--batch-size"], 512)?;
    let model = Arc::new(crate::load_model(path, a)?);
    let speculation = speculation(a, &model)?;
    let draft =
        (speculation.draft_model.as_deref()).or(speculation.assistant.as_ref().map(|a| &a.model));
    let (n_ctx, (type_k, type_v)) = match crate::budget_fit(a, &model, draft, n_slots, n_batch)? {
        Some(fit) => (fit.n_ctx, (fit.type_k, fit.type_v)),
        None => (
            a.parse_or(&["-c", "--ctx-size"], model.hparams.n_ctx_train.min(4096))?,
            crate::kv_types(a)?,
        ),
    };
    let scheduler = Scheduler::start(
        Arc::clone(&model),
        SchedulerParams {
            n_slots,
            n_ctx,
            n_threads: a.parse_or(&["-t", "--threads"], crate::default_threads())?,
            n_batch,
            max_queue: a.parse_or(&["--queue"], 64)?,
            type_k,
            type_v,
            context_shift: a
                .has("--context-shift")
                .then(|| a.parse_or(&["--keep"], 0))
                .transpose()?,
            speculation,
        },
    )
    .map_err(|e| e.to_string())?;
    let template = match crate::template_file(a, &model)? {
        Some(template) => Ok(template),
        None => ChatTemplate::from_model(&model),
    };
    Ok(Engine::new(scheduler, template, model_id))
}

/// Without `-m`: the models of the local store, each loaded when a request names it.
fn on_demand(a: &Arc<Args>) -> Result<(ModelPool, String), String> {
    let one_model = [
        "--draft",
        "-md",
        "--draft-assistant",
        "--alias",
        "--spec",
        "--spec-type",
    ];
    if let Some(flag) = one_model.iter().find(|f| a.get(&[f]).is_some()) {
        return Err(format!(
            "{flag} goes with -m (one model); without it, models load on demand by name"
        ));
    }
    let models_max: usize = a.parse_or(&["--models-max"], 1)?;
    if models_max == 0 {
        return Err("--models-max must be at least 1".into());
    }
    let idle_secs: f64 = a.parse_or(&["--idle-unload"], 300.0)?;
    let idle_unload = (idle_secs > 0.0).then(|| Duration::from_secs_f64(idle_secs));
    let store = kolibri::store::Store::from_env();
    let found = store.list().len();
    let settings = Arc::clone(a);
    let loader: Loader = Arc::new(move |m: &kolibri::store::StoredModel| {
        eprintln!("kolibri serve: loading {} ({})", m.name, m.path().display());
        engine(&m.path().display().to_string(), m.name.clone(), &settings)
    });
    let serving = format!(
        "{found} models in the store, loaded on demand, at most {models_max} at once{}",
        idle_unload.map_or(String::new(), |d| format!(
            ", unloaded after {} s idle",
            d.as_secs_f64()
        ))
    );
    Ok((
        ModelPool::on_demand(store, loader, models_max, idle_unload),
        serving,
    ))
}

/// Unloads models idle longer than `--idle-unload`, checking a few times a second.
async fn unload_idle(app: Arc<AppState>) {
    let ModelPool::OnDemand(pool) = &app.pool else {
        return;
    };
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let n = pool.unload_idle().await;
        if n > 0 {
            eprintln!("kolibri serve: unloaded {n} idle model(s)");
        }
    }
}

/// `--reasoning-format`, `--chat-template-kwargs` and `--reasoning-budget`, checked as a
/// request's own fields are.
fn thinking_options(a: &Args) -> Result<ThinkingOptions, String> {
    let kwargs = a
        .get(&["--chat-template-kwargs"])
        .map(serde_json::from_str::<serde_json::Value>)
        .transpose()
        .map_err(|e| format!("--chat-template-kwargs is not JSON: {e}"))?;
    let budget: Option<i64> = a
        .get(&["--reasoning-budget"])
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("--reasoning-budget: {e}"))?;
    ThinkingOptions::default()
        .overridden(a.get(&["--reasoning-format"]), kwargs.as_ref(), budget)
        .map_err(|e| e.message.replace("reasoning_format", "--reasoning-format"))
}

/// `--lookup`, `--draft MODEL`, `--draft-assistant FILE` or `--spec mtp`, `--draft-max N`,
/// `--draft-p-min P`.
fn speculation(
    a: &crate::args::Args,
    target: &kolibri::model::Model,
) -> Result<Speculation, String> {
    use crate::speculate::DraftModel;
    let (draft_model, assistant) = match crate::speculate::load_draft(a, target)? {
        Some(DraftModel::Model(m)) => (Some(m), None),
        Some(DraftModel::Assistant(x)) => (None, Some(x)),
        None => (None, None),
    };
    let mtp = crate::speculate::wants_mtp(a)?;
    if !a.has("--lookup") && draft_model.is_none() && assistant.is_none() && !mtp {
        return Ok(Speculation::default());
    }
    let max_draft = match a.parse_or(&["--draft-max"], 16usize)? {
        n @ 1..=32 => n,
        n => return Err(format!("--draft-max {n} is not in 1..=32")),
    };
    let draft_p_min: f32 = a.parse_or(&["--draft-p-min"], 0.5)?;
    if !(0.0..=1.0).contains(&draft_p_min) {
        return Err(format!("--draft-p-min {draft_p_min} is not in 0..=1"));
    }
    Ok(Speculation {
        max_draft,
        lookup: a.has("--lookup"),
        draft_model,
        draft_p_min,
        mtp,
        assistant,
    })
}
