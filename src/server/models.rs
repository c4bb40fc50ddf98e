//! The model endpoints: OpenAI's `/v1/models`, Ollama's `/api/tags`, `/api/ps`, `/api/show`,
//! `/api/pull` (a Hugging Face download into the cache, progress as NDJSON) and `/api/delete`.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::gguf::GgufFile;
use crate::store::describe;

use super::api;
use super::catalog::{listed, Listed};
use super::error::ApiError;
use super::ollama::{now, rfc3339, OllamaError};
use super::pool::ModelPool;
use super::routes::{body_bytes, App};

/// A model as `/v1/models` lists it: the server's one, or each of the store's (with whether it
/// is loaded).
fn model_object(m: &Listed) -> Value {
    let mut v = json!({
        "id": m.name,
        "object": "model",
        "created": m.created,
        "owned_by": m.owner,
    });
    if let Some(loaded) = m.loaded {
        v["status"] = json!(if loaded { "loaded" } else { "unloaded" });
    }
    v
}

pub async fn list_models(State(app): App, headers: HeaderMap) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let data: Vec<Value> = listed(&app, false)
        .await?
        .iter()
        .map(model_object)
        .collect();
    Ok(Json(json!({ "object": "list", "data": data })).into_response())
}

pub async fn get_model(
    State(app): App,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let name = match &app.pool {
        ModelPool::Fixed(e) => Some(e.model_id.clone()).filter(|n| *n == id),
        ModelPool::OnDemand(_) => stored(&app, &id).await.ok().map(|(name, _)| name),
    };
    let all = listed(&app, false).await?;
    match all.iter().find(|m| Some(&m.name) == name.as_ref()) {
        Some(m) => Ok(Json(model_object(m)).into_response()),
        None => Err(
            ApiError::not_found(format!("the model {id:?} does not exist"))
                .with_code("model_not_found"),
        ),
    }
}

/// A model as Ollama's `/api/tags` lists it.
fn tag_entry(m: &Listed) -> Value {
    let facts = m.facts.as_ref();
    json!({
        "name": m.name,
        "model": m.name,
        "modified_at": rfc3339(Duration::from_secs(m.created)),
        "size": facts.map_or(0, |f| f.size),
        "digest": m.digest,
        "details": facts.map_or(json!({"format": "gguf"}), |f| f.details()),
    })
}

pub async fn tags(State(app): App, headers: HeaderMap) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    let models: Vec<Value> = listed(&app, true).await?.iter().map(tag_entry).collect();
    Ok(Json(json!({ "models": models })).into_response())
}

/// The models in memory, with when each will be unloaded.
pub async fn ps(State(app): App, headers: HeaderMap) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    let idle_unload = match &app.pool {
        ModelPool::OnDemand(d) => d.idle_unload,
        ModelPool::Fixed(_) => None,
    };
    let models: Vec<Value> = app
        .pool
        .resident()
        .iter()
        .map(|e| {
            let facts = crate::store::ModelFacts::of(&e.scheduler.model().gguf);
            let expires = match idle_unload {
                Some(after) => {
                    let left = after.saturating_sub(e.last_used().elapsed());
                    rfc3339(now() + left)
                }
                None => "2100-01-01T00:00:00Z".into(),
            };
            json!({
                "name": e.model_id,
                "model": e.model_id,
                "size": facts.size,
                "digest": "",
                "details": facts.details(),
                "expires_at": expires,
                "size_vram": 0,
                "context_length": e.scheduler.params().n_ctx,
            })
        })
        .collect();
    Ok(Json(json!({ "models": models })).into_response())
}

#[derive(Deserialize)]
pub struct NamedRequest {
    model: Option<String>,
    /// Older clients send `name`.
    name: Option<String>,
    #[serde(default)]
    verbose: bool,
    /// `/api/pull`: progress as NDJSON lines (the default), or one answer at the end.
    #[cfg_attr(not(feature = "hub"), allow(dead_code))]
    stream: Option<bool>,
}

impl NamedRequest {
    fn parse(body: std::result::Result<Bytes, BytesRejection>) -> Result<(String, Self), ApiError> {
        let req: NamedRequest = api::parse(&body_bytes(body)?)?;
        let name = req.model.clone().or(req.name.clone()).unwrap_or_default();
        Ok((name, req))
    }
}

pub async fn show(
    State(app): App,
    headers: HeaderMap,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    let (name, req) = NamedRequest::parse(body)?;
    let mut shown = match &app.pool {
        ModelPool::Fixed(_) => {
            let e = app.pool.get(Some(&name), true).await?;
            describe(&e.scheduler.model().gguf, &e.model_id, req.verbose)
        }
        ModelPool::OnDemand(_) => {
            let (name, path) = stored(&app, &name).await?;
            tokio::task::spawn_blocking(move || {
                GgufFile::open(&path)
                    .map(|g| describe(&g, &name, req.verbose))
                    .map_err(|e| ApiError::server(format!("{}: {e}", path.display())))
            })
            .await
            .map_err(|e| ApiError::server(e.to_string()))??
        }
    };
    shown["modified_at"] = json!(rfc3339(now()));
    Ok(Json(shown).into_response())
}

/// Deletes a model from the local store (unloading it first).
pub async fn delete(
    State(app): App,
    headers: HeaderMap,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    let (name, _) = NamedRequest::parse(body)?;
    let ModelPool::OnDemand(d) = &app.pool else {
        return Err(ApiError::bad_request(
            "this server serves one model (-m); start it without -m to manage the model store"
                .into(),
            None,
        )
        .into());
    };
    let (stored_name, _) = stored(&app, &name).await?;
    d.unload(&stored_name).await;
    let store = d.store.clone();
    tokio::task::spawn_blocking(move || store.remove(&stored_name))
        .await
        .map_err(|e| ApiError::server(e.to_string()))?
        .map_err(ApiError::server)?;
    Ok(Json(json!({})).into_response())
}

/// Downloads a model by Hugging Face name (`OWNER/REPO[:QUANT]`, `hf.co/` optional) into the
/// cache, as `kolibri pull` does; streamed, each line is Ollama's progress object.
#[cfg(feature = "hub")]
pub async fn pull(
    State(app): App,
    headers: HeaderMap,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    let (name, req) = NamedRequest::parse(body)?;
    let bare = ["hf.co/", "huggingface.co/"]
        .iter()
        .fold(name.trim(), |n, p| n.strip_prefix(p).unwrap_or(n));
    let hub_name = crate::hub::HubName::parse(bare).map_err(|e| {
        ApiError::bad_request(
            format!(
                "{name:?}: {e}; this server pulls from Hugging Face: OWNER/REPO[:QUANT] or \
                 hf.co/OWNER/REPO[:QUANT]"
            ),
            Some("model"),
        )
    })?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let download = tokio::task::spawn_blocking(move || {
        let mut progress = pull_progress::Lines::new(tx.clone());
        let _ = tx.send(json!({ "status": "pulling manifest" }));
        let fetched = crate::hub::Hub::from_env()
            .verifying_cached()
            .fetch(&hub_name, &mut progress);
        let last = match fetched {
            Ok(_) => {
                let _ = tx.send(json!({ "status": "verifying sha256 digest" }));
                let _ = tx.send(json!({ "status": "writing manifest" }));
                json!({ "status": "success" })
            }
            Err(e) => json!({ "error": e }),
        };
        let _ = tx.send(last.clone());
        last
    });
    if req.stream.unwrap_or(true) {
        return Ok(pull_progress::ndjson(rx));
    }
    let last = download
        .await
        .map_err(|e| ApiError::server(e.to_string()))?;
    match last.get("error").and_then(Value::as_str) {
        Some(e) => Err(ApiError::server(e.to_owned()).into()),
        None => Ok(Json(last).into_response()),
    }
}

#[cfg(not(feature = "hub"))]
pub async fn pull(State(app): App, headers: HeaderMap) -> Result<Response, OllamaError> {
    app.authorize(&headers)?;
    Err(
        ApiError::not_implemented("this server was built without downloads (feature `hub`)".into())
            .into(),
    )
}

#[cfg(feature = "hub")]
mod pull_progress {
    use std::convert::Infallible;
    use std::time::Instant;

    use axum::body::{Body, Bytes};
    use axum::http::{header, StatusCode};
    use axum::response::{IntoResponse, Response};
    use serde_json::{json, Value};
    use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

    /// A download's progress as Ollama's lines: `{"status": "pulling FILE", "digest",
    /// "total", "completed"}`, at most a few a second.
    pub struct Lines {
        tx: UnboundedSender<Value>,
        file: String,
        total: u64,
        done: u64,
        last: Option<Instant>,
    }

    impl Lines {
        pub fn new(tx: UnboundedSender<Value>) -> Lines {
            Lines {
                tx,
                file: String::new(),
                total: 0,
                done: 0,
                last: None,
            }
        }

        fn send(&mut self, force: bool) {
            let due = self.last.is_none_or(|t| t.elapsed().as_millis() >= 200);
            if force || due {
                self.last = Some(Instant::now());
                let _ = self.tx.send(json!({
                    "status": format!("pulling {}", self.file),
                    "digest": self.file,
                    "total": self.total,
                    "completed": self.done,
                }));
            }
        }
    }

    impl crate::hub::Progress for Lines {
        fn start(&mut self, file: &str, done: u64, total: u64) {
            (self.file, self.done, self.total) = (file.to_owned(), done, total);
            self.send(true);
        }

        fn advance(&mut self, bytes: u64) {
            self.done += bytes;
            self.send(false);
        }

        fn finish(&mut self) {
            self.send(true);
        }
    }

    pub fn ndjson(rx: UnboundedReceiver<Value>) -> Response {
        let body = futures_util::stream::unfold(rx, |mut rx| async move {
            let line = rx.recv().await?;
            Some((Ok::<_, Infallible>(Bytes::from(format!("{line}\n"))), rx))
        });
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-ndjson")],
            Body::from_stream(body),
        )
            .into_response()
    }
}

/// The store's model `name` stands for: its name there and the file to read.
async fn stored(
    app: &super::state::AppState,
    name: &str,
) -> Result<(String, std::path::PathBuf), ApiError> {
    let ModelPool::OnDemand(d) = &app.pool else {
        return Err(ApiError::not_found(format!("model '{name}' not found")));
    };
    let store = d.store.clone();
    let wanted = name.to_owned();
    tokio::task::spawn_blocking(move || store.find(&wanted))
        .await
        .map_err(|e| ApiError::server(e.to_string()))?
        .map(|m| (m.name.clone(), m.path().to_path_buf()))
        .map_err(|_| {
            ApiError::not_found(format!("model '{name}' not found")).with_code("model_not_found")
        })
}
