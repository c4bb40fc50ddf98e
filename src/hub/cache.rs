//! The Hugging Face cache as the Python `huggingface_hub` package lays it out (and llama.cpp
//! since it adopted the layout):
//! `ROOT/models--OWNER--REPO/{blobs/<sha256 or git sha1>, refs/<branch> (a commit id),
//! snapshots/<commit>/<path in the repository> (a relative link to its blob)}`.

use std::path::{Path, PathBuf};

use super::name::HubName;
use super::pick::pick;

/// A Hugging Face cache directory.
#[derive(Clone, Debug)]
pub struct HfCache {
    root: PathBuf,
}

impl HfCache {
    pub fn new(root: impl Into<PathBuf>) -> HfCache {
        HfCache { root: root.into() }
    }

    /// Where `huggingface_hub` keeps it: `HF_HUB_CACHE`, `HUGGINGFACE_HUB_CACHE`,
    /// `HF_HOME/hub`, `XDG_CACHE_HOME/huggingface/hub`, `~/.cache/huggingface/hub`.
    pub fn from_env() -> HfCache {
        Self::from_vars(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
    }

    fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> HfCache {
        let root = var("HF_HUB_CACHE")
            .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .or_else(|| var("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
            .or_else(|| var("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("huggingface/hub")))
            .unwrap_or_else(|| {
                let home = var("HOME")
                    .or_else(|| var("USERPROFILE"))
                    .unwrap_or_default();
                PathBuf::from(home).join(".cache/huggingface/hub")
            });
        HfCache { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `ROOT/models--OWNER--REPO`.
    pub fn repo_dir(&self, name: &HubName) -> PathBuf {
        self.root
            .join(format!("models--{}--{}", name.owner, name.repo))
    }

    /// The cached snapshot of `revision` (a branch or tag in `refs/`, or a commit id).
    pub fn snapshot(&self, name: &HubName, revision: &str) -> Option<PathBuf> {
        let repo = self.repo_dir(name);
        let commit = match std::fs::read_to_string(repo.join("refs").join(revision)) {
            Ok(commit) => commit.trim().to_owned(),
            Err(_) => revision.to_owned(),
        };
        let is_commit = commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit());
        let dir = repo.join("snapshots").join(commit);
        (is_commit && dir.is_dir()).then_some(dir)
    }

    /// The model's files in the cached snapshot of `main`, picked as [`pick`] picks them from
    /// the files cached there (every part of a split model); the first is the one to load.
    pub fn resolve(&self, name: &HubName) -> Result<Vec<PathBuf>, String> {
        let Some(dir) = self.snapshot(name, "main") else {
            return Err(format!(
                "{} is not in the Hugging Face cache ({})",
                name.repo_id(),
                self.root.display()
            ));
        };
        let files = files_in(&dir);
        let picked = pick(&files, name.quant.as_deref())
            .map_err(|e| format!("{} in the Hugging Face cache: {e}", name.repo_id()))?;
        Ok(picked.iter().map(|f| dir.join(f)).collect())
    }
}

/// The files below `dir` whose content is there (a link to a missing blob is an unfinished
/// download), as repository paths (`/`-separated), sorted.
pub(crate) fn files_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((at, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for e in entries.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let path = e.path();
            let rel = format!("{prefix}{name}");
            if path.is_dir() {
                stack.push((path, format!("{rel}/")));
            } else if path.is_file() {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn the_root_follows_huggingface_hubs_variables() {
        let with = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, OsString)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect();
            HfCache::from_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())).root
        };
        let all = [
            ("HF_HUB_CACHE", "/a"),
            ("HUGGINGFACE_HUB_CACHE", "/b"),
            ("HF_HOME", "/c"),
            ("XDG_CACHE_HOME", "/d"),
            ("HOME", "/e"),
        ];
        assert_eq!(with(&all), Path::new("/a"));
        assert_eq!(with(&all[1..]), Path::new("/b"));
        assert_eq!(with(&all[2..]), Path::new("/c/hub"));
        assert_eq!(with(&all[3..]), Path::new("/d/huggingface/hub"));
        assert_eq!(with(&all[4..]), Path::new("/e/.cache/huggingface/hub"));
    }

    #[cfg(unix)]
    #[test]
    fn a_cached_snapshot_resolves_by_name_and_quant() {
        let root = std::env::temp_dir().join(format!("kolibri-hf-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let name = HubName::parse("owner/Model-GGUF:q8_0").unwrap();
        let cache = HfCache::new(&root);
        let repo = cache.repo_dir(&name);
        assert_eq!(repo, root.join("models--owner--Model-GGUF"));
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let snap = repo.join("snapshots").join(commit);
        std::fs::create_dir_all(snap.join("sub")).unwrap();
        std::fs::create_dir_all(repo.join("blobs")).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        assert!(cache
            .resolve(&name)
            .unwrap_err()
            .contains("not in the Hugging Face cache"));
        // No newline, as huggingface_hub writes it (one is tolerated).
        std::fs::write(repo.join("refs/main"), format!("{commit}\n")).unwrap();
        for (file, blob) in [("m-Q8_0.gguf", Some("b1")), ("sub/m-Q4_K_M.gguf", None)] {
            let depth = "../".repeat(2 + file.matches('/').count());
            if let Some(b) = blob {
                std::fs::write(repo.join("blobs").join(b), b"GGUF").unwrap();
            }
            // A link to a blob not yet downloaded is not a cached file.
            let target = format!("{depth}blobs/{}", blob.unwrap_or("missing"));
            std::os::unix::fs::symlink(target, snap.join(file)).unwrap();
        }
        assert_eq!(cache.resolve(&name).unwrap(), [snap.join("m-Q8_0.gguf")]);
        let q4 = HubName::parse("owner/Model-GGUF:Q4_K_M").unwrap();
        let e = cache.resolve(&q4).unwrap_err();
        assert!(
            e.contains("no GGUF file of quantization Q4_K_M") && e.contains("m-Q8_0.gguf"),
            "{e}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
