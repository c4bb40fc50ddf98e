//! What the server lists (`/v1/models`, `/api/tags`): its one model, or, loading on demand,
//! every model of the local store with whether it is loaded.

use std::time::UNIX_EPOCH;

use crate::store::{ModelFacts, Source};

use super::error::ApiError;
use super::pool::ModelPool;
use super::state::AppState;

pub struct Listed {
    pub name: String,
    /// Unix time: the model's file time in the store, else when it was loaded.
    pub created: u64,
    pub owner: &'static str,
    /// Loading on demand: whether it is in memory now.
    pub loaded: Option<bool>,
    pub digest: String,
    /// Read from the file's header when asked for.
    pub facts: Option<ModelFacts>,
}

/// The models the server offers; `with_facts` reads each one's header too.
pub async fn listed(app: &AppState, with_facts: bool) -> Result<Vec<Listed>, ApiError> {
    let d = match &app.pool {
        ModelPool::Fixed(e) => {
            let facts = ModelFacts::of(&e.scheduler.model().gguf);
            return Ok(vec![Listed {
                name: e.model_id.clone(),
                created: e.loaded,
                owner: "kolibri",
                loaded: None,
                digest: format!("{:016x}", facts.size ^ e.loaded),
                facts: Some(facts),
            }]);
        }
        ModelPool::OnDemand(d) => d,
    };
    let resident: Vec<String> = app
        .pool
        .resident()
        .iter()
        .map(|e| e.model_id.clone())
        .collect();
    let store = d.store.clone();
    let stored = tokio::task::spawn_blocking(move || {
        store
            .list()
            .into_iter()
            .map(|m| {
                let facts = with_facts
                    .then(|| ModelFacts::read(m.path()).ok())
                    .flatten();
                (m, facts)
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| ApiError::server(format!("listing the models failed: {e}")))?;
    let mut out: Vec<Listed> = Vec::new();
    for (m, facts) in stored {
        // A name in two places is the first place's model (the one a request loads).
        if out.iter().any(|l| l.name.eq_ignore_ascii_case(&m.name)) {
            continue;
        }
        out.push(Listed {
            loaded: Some(resident.contains(&m.name)),
            created: m
                .modified
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs()),
            owner: owner(m.source),
            digest: m.digest.clone().unwrap_or_default(),
            name: m.name,
            facts,
        });
    }
    Ok(out)
}

fn owner(source: Source) -> &'static str {
    match source {
        Source::HuggingFace => "huggingface",
        Source::Ollama => "ollama",
        Source::LmStudio => "lm-studio",
    }
}
