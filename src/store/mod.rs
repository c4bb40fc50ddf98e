//! The local model store: every GGUF model already on this machine, by name, without copying
//! a byte. Three places are read in place:
//! - the Hugging Face cache (where `kolibri pull` and `-hf` download; `OWNER/REPO:QUANT`),
//! - an Ollama store (`qwen3:8b`, `hf.co/OWNER/REPO:QUANT`; [`ollama`]),
//! - an LM Studio models folder (`PUBLISHER/REPO:QUANT`).
//!
//! Names are matched case-insensitively, `hf.co/` and Ollama's default registry left out, a
//! name without a tag meaning `:latest` or the repository's default quantization. Where two
//! places hold the same name, the Hugging Face cache wins, then Ollama, then LM Studio.

mod facts;
mod folders;
pub mod ollama;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::hub::HfCache;

pub use facts::{capabilities, describe, model_info, parameter_size, ModelFacts};

/// Where a stored model lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    HuggingFace,
    Ollama,
    LmStudio,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::HuggingFace => "hf-cache",
            Source::Ollama => "ollama",
            Source::LmStudio => "lm-studio",
        }
    }
}

/// A model in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredModel {
    pub name: String,
    pub source: Source,
    /// The GGUF files, a split model's every part in order; the first is the one to load.
    pub files: Vec<PathBuf>,
    /// Bytes on disk, all parts.
    pub size: u64,
    pub modified: Option<SystemTime>,
    /// The sha256 of the (first) file, where the store names files by it.
    pub digest: Option<String>,
    /// What stands for the model in its store: an Ollama manifest, else the first file as the
    /// store names it (a Hugging Face snapshot's link).
    entry: PathBuf,
}

impl StoredModel {
    /// The file to load (a split model's first part).
    pub fn path(&self) -> &Path {
        &self.files[0]
    }
}

/// The places models are looked for.
#[derive(Clone, Debug)]
pub struct Store {
    pub hf: HfCache,
    pub ollama: Vec<PathBuf>,
    pub lmstudio: Vec<PathBuf>,
}

impl Store {
    /// The Hugging Face cache as huggingface_hub finds it; Ollama's store at `OLLAMA_MODELS`,
    /// else `~/.ollama/models` (and the Linux service's `/usr/share/ollama/.ollama/models`);
    /// LM Studio's models folder (`~/.lmstudio-home-pointer`'s, `~/.lmstudio/models`,
    /// `~/.cache/lm-studio/models`).
    pub fn from_env() -> Store {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let home = var("HOME")
            .or_else(|| var("USERPROFILE"))
            .map(PathBuf::from);
        let ollama = match var("OLLAMA_MODELS") {
            Some(dir) => vec![PathBuf::from(dir)],
            None => home
                .iter()
                .map(|h| h.join(".ollama/models"))
                .chain([PathBuf::from("/usr/share/ollama/.ollama/models")])
                .collect(),
        };
        let pointer = home
            .as_ref()
            .and_then(|h| std::fs::read_to_string(h.join(".lmstudio-home-pointer")).ok())
            .map(|p| PathBuf::from(p.trim()).join("models"));
        let lmstudio = pointer
            .into_iter()
            .chain(home.iter().flat_map(|h| {
                [
                    h.join(".lmstudio/models"),
                    h.join(".cache/lm-studio/models"),
                ]
            }))
            .collect();
        Store {
            hf: HfCache::from_env(),
            ollama: existing(ollama),
            lmstudio: existing(lmstudio),
        }
    }

    /// Every model, by name, the winning place's first where a name repeats.
    pub fn list(&self) -> Vec<StoredModel> {
        let mut all = folders::hf_cache(&self.hf);
        for root in &self.ollama {
            all.extend(ollama::list(root));
        }
        for root in &self.lmstudio {
            all.extend(folders::lmstudio(root));
        }
        all.sort_by_key(|m| (key(&m.name), m.source));
        all
    }

    /// The model `name` stands for.
    pub fn find(&self, name: &str) -> Result<StoredModel, String> {
        let all = self.list();
        let wanted = key(name);
        let exact = |k: &str| all.iter().find(|m| key(&m.name) == k);
        let found = exact(&wanted).or_else(|| {
            if wanted.contains(':') {
                return None;
            }
            exact(&format!("{wanted}:latest")).or_else(|| default_quant(&all, &wanted))
        });
        found.cloned().ok_or_else(|| {
            format!(
                "no model {name:?} in the model store (`kolibri list` shows what is there; \
                 `kolibri pull OWNER/REPO[:QUANT]` downloads one)"
            )
        })
    }

    /// Deletes the model `name` stands for from its place, as that place's own tool would;
    /// returns what was deleted.
    pub fn remove(&self, name: &str) -> Result<StoredModel, String> {
        let model = self.find(name)?;
        match model.source {
            Source::HuggingFace => folders::remove_from_hf_cache(&model)?,
            Source::Ollama => ollama::remove(root_of(&self.ollama, &model)?, &model)?,
            Source::LmStudio => folders::remove_files(root_of(&self.lmstudio, &model)?, &model)?,
        }
        Ok(model)
    }
}

/// Which of a place's roots holds the model.
fn root_of<'a>(roots: &'a [PathBuf], model: &StoredModel) -> Result<&'a Path, String> {
    roots
        .iter()
        .find(|r| model.entry.starts_with(r))
        .map(PathBuf::as_path)
        .ok_or_else(|| format!("{}: its store is gone", model.name))
}

/// `OWNER/REPO` without a tag: the repository's Q4_K_M model, else its Q8_0 one, else its
/// first (as `-hf` picks).
fn default_quant<'a>(all: &'a [StoredModel], repo: &str) -> Option<&'a StoredModel> {
    if !repo.contains('/') {
        return None;
    }
    let in_repo: Vec<&StoredModel> = all
        .iter()
        .filter(|m| {
            key(&m.name)
                .strip_prefix(repo)
                .is_some_and(|t| t.starts_with(':'))
        })
        .collect();
    let tagged = |tag: &str| {
        in_repo
            .iter()
            .find(|m| key(&m.name).ends_with(&format!(":{tag}")))
    };
    tagged("q4_k_m")
        .or_else(|| tagged("q8_0"))
        .or(in_repo.first())
        .copied()
}

/// A name as it is compared: lower case, without `hf.co/` or Ollama's default registry.
fn key(name: &str) -> String {
    let mut k = name.trim().to_ascii_lowercase();
    for prefix in [
        "https://huggingface.co/",
        "huggingface.co/",
        "hf.co/",
        "registry.ollama.ai/",
        "library/",
    ] {
        if let Some(rest) = k.strip_prefix(prefix) {
            k = rest.to_owned();
        }
    }
    k
}

fn existing(dirs: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if d.is_dir() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// Whether the file starts as a GGUF file does.
fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"GGUF"
}

/// A folder's entries with UTF-8 names, sorted by name.
fn entries(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.path(), e.file_name().into_string().ok()?)))
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_without_case_or_default_registries() {
        assert_eq!(
            key("hf.co/Qwen/Qwen3-8B-GGUF:Q4_K_M"),
            "qwen/qwen3-8b-gguf:q4_k_m"
        );
        assert_eq!(key("registry.ollama.ai/library/qwen3:8b"), "qwen3:8b");
        assert_eq!(key(" Qwen3:8B "), "qwen3:8b");
    }
}
