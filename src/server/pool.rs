//! The models a server serves: one given at start (`-m`), or any model of the local store,
//! loaded when a request names it (Ollama's and llama-server's router behaviour): at most
//! `models_max` resident, the least recently used idle one unloaded to make room, and each
//! unloaded after `idle_unload` without requests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::store::{Store, StoredModel};

use super::engine::Engine;
use super::error::ApiError;

/// Makes the engine of a stored model (the command line's load settings inside).
pub type Loader = Arc<dyn Fn(&StoredModel) -> Result<Engine, String> + Send + Sync>;

pub enum ModelPool {
    Fixed(Arc<Engine>),
    OnDemand(OnDemand),
}

pub struct OnDemand {
    pub store: Store,
    loader: Loader,
    pub models_max: usize,
    pub idle_unload: Option<Duration>,
    resident: Mutex<Vec<Arc<Engine>>>,
    /// One load at a time: two requests for one model load it once.
    loading: tokio::sync::Mutex<()>,
}

impl ModelPool {
    pub fn fixed(engine: Engine) -> ModelPool {
        ModelPool::Fixed(Arc::new(engine))
    }

    pub fn on_demand(
        store: Store,
        loader: Loader,
        models_max: usize,
        idle_unload: Option<Duration>,
    ) -> ModelPool {
        ModelPool::OnDemand(OnDemand {
            store,
            loader,
            models_max: models_max.max(1),
            idle_unload,
            resident: Mutex::new(Vec::new()),
            loading: tokio::sync::Mutex::new(()),
        })
    }

    /// The models in memory now.
    pub fn resident(&self) -> Vec<Arc<Engine>> {
        match self {
            ModelPool::Fixed(e) => vec![Arc::clone(e)],
            ModelPool::OnDemand(d) => d.lock().clone(),
        }
    }

    /// The engine for a request's `model`. A fixed server serves its model whatever the name
    /// (as llama-server does) unless `strict` (Ollama's endpoints: another name is not
    /// found); an on-demand one loads the stored model of that name if it is not resident.
    pub async fn get(&self, name: Option<&str>, strict: bool) -> Result<Arc<Engine>, ApiError> {
        let name = name.map(str::trim).filter(|n| !n.is_empty());
        match self {
            ModelPool::Fixed(e) => {
                // Ollama names carry a tag (`name:latest`); the bare name is the same model.
                match name {
                    Some(n) if strict && n.split(':').next() != Some(e.model_id.as_str()) => {
                        Err(not_found(n))
                    }
                    _ => Ok(Arc::clone(e)),
                }
            }
            ModelPool::OnDemand(d) => d.get(name).await,
        }
    }
}

impl ModelPool {
    /// Unloads the model `name` names, if this server loads models on demand and it is
    /// resident; whether one was. A fixed server's one model stays.
    pub async fn unload_named(&self, name: &str) -> bool {
        let ModelPool::OnDemand(d) = self else {
            return false;
        };
        let resident = d.find_resident(name).map(|e| e.model_id.clone());
        let id = match resident {
            Some(id) => id,
            None => {
                let store = d.store.clone();
                let wanted = name.to_owned();
                let found = tokio::task::spawn_blocking(move || store.find(&wanted)).await;
                match found {
                    Ok(Ok(stored)) => stored.name.clone(),
                    _ => return false,
                }
            }
        };
        let was = d.find_resident(&id).is_some();
        d.unload(&id).await;
        was
    }
}

impl OnDemand {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Engine>>> {
        self.resident.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn find_resident(&self, model_id: &str) -> Option<Arc<Engine>> {
        let found = self.lock().iter().find(|e| e.model_id == model_id).cloned();
        found.inspect(|e| e.touch())
    }

    async fn get(&self, name: Option<&str>) -> Result<Arc<Engine>, ApiError> {
        let Some(name) = name else {
            let resident = self.lock();
            return match resident.as_slice() {
                [only] => Ok(Arc::clone(only)),
                _ => Err(ApiError::bad_request(
                    "name the model (\"model\"): this server loads models on demand; \
                     GET /v1/models lists them"
                        .into(),
                    Some("model"),
                )),
            };
        };
        if let Some(e) = self.find_resident(name) {
            return Ok(e);
        }
        let stored = self.store.find(name).map_err(|_| not_found(name))?;
        let _loading = self.loading.lock().await;
        if let Some(e) = self.find_resident(&stored.name) {
            return Ok(e);
        }
        self.make_room().await;
        let loader = Arc::clone(&self.loader);
        let engine = tokio::task::spawn_blocking(move || loader(&stored))
            .await
            .map_err(|e| ApiError::server(format!("loading the model failed: {e}")))?
            .map_err(|e| ApiError::server(format!("cannot load the model: {e}")))?;
        let engine = Arc::new(engine);
        self.lock().push(Arc::clone(&engine));
        Ok(engine)
    }

    /// Unloads models until one more fits under `models_max`: the least recently used idle
    /// one first (a busy one finishes its requests first).
    async fn make_room(&self) {
        loop {
            let victim = {
                let mut resident = self.lock();
                if resident.len() < self.models_max {
                    return;
                }
                let pick = (0..resident.len())
                    .min_by_key(|&i| (!resident[i].is_idle(), resident[i].last_used()))
                    .expect("full means not empty");
                resident.remove(pick)
            };
            drop_engine(victim).await;
        }
    }

    /// Unloads every model idle for `idle_unload`; how many went.
    pub async fn unload_idle(&self) -> usize {
        let Some(after) = self.idle_unload else {
            return 0;
        };
        let victims: Vec<Arc<Engine>> = {
            let mut resident = self.lock();
            let (gone, kept) = resident.drain(..).partition(|e: &Arc<Engine>| {
                Arc::strong_count(e) == 1 && e.is_idle() && e.last_used().elapsed() >= after
            });
            *resident = kept;
            gone
        };
        let n = victims.len();
        for v in victims {
            drop_engine(v).await;
        }
        n
    }

    /// Unloads the model served as `model_id`, if resident (before its files are deleted).
    pub async fn unload(&self, model_id: &str) {
        let victim = {
            let mut resident = self.lock();
            let at = resident.iter().position(|e| e.model_id == model_id);
            at.map(|i| resident.remove(i))
        };
        if let Some(v) = victim {
            drop_engine(v).await;
        }
    }
}

/// Drops an engine off the async threads: its scheduler finishes what it holds, then its
/// memory is released.
async fn drop_engine(engine: Arc<Engine>) {
    let _ = tokio::task::spawn_blocking(move || drop(engine)).await;
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("model '{name}' not found")).with_code("model_not_found")
}
