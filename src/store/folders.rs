//! Stores that are folders of repositories of GGUF files: the Hugging Face cache
//! (`models--OWNER--REPO/snapshots/COMMIT/...`) and LM Studio's models folder
//! (`PUBLISHER/REPO/...`). Each model file (a split model's first part) of a repository is
//! `OWNER/REPO:QUANT`, the quantization its name states, else its name.

use std::path::{Path, PathBuf};

use super::{entries, is_gguf, Source, StoredModel};
use crate::hub::{models_in, quant_tag, HfCache};

/// The models of every repository in the Hugging Face cache, from the snapshot `refs/main`
/// names (else the newest).
pub fn hf_cache(cache: &HfCache) -> Vec<StoredModel> {
    let mut out = Vec::new();
    for (dir, name) in entries(cache.root()) {
        let Some(id) = name.strip_prefix("models--") else {
            continue;
        };
        let Some((owner, repo)) = id.split_once("--") else {
            continue;
        };
        if let Some(snapshot) = main_snapshot(&dir) {
            out.extend(repository(
                &format!("{owner}/{repo}"),
                &snapshot,
                Source::HuggingFace,
            ));
        }
    }
    out
}

/// The models of LM Studio's `PUBLISHER/REPO` folders.
pub fn lmstudio(root: &Path) -> Vec<StoredModel> {
    let mut out = Vec::new();
    for (publisher_dir, publisher) in entries(root) {
        for (repo_dir, repo) in entries(&publisher_dir) {
            if repo_dir.is_dir() {
                out.extend(repository(
                    &format!("{publisher}/{repo}"),
                    &repo_dir,
                    Source::LmStudio,
                ));
            }
        }
    }
    out
}

fn main_snapshot(repo: &Path) -> Option<PathBuf> {
    let snapshots = repo.join("snapshots");
    let main = std::fs::read_to_string(repo.join("refs/main")).ok();
    let named = main
        .map(|c| snapshots.join(c.trim()))
        .filter(|d| d.is_dir());
    named.or_else(|| {
        entries(&snapshots)
            .into_iter()
            .map(|(d, _)| d)
            .filter(|d| d.is_dir())
            .max_by_key(|d| std::fs::metadata(d).and_then(|m| m.modified()).ok())
    })
}

/// The models in one repository's folder, named `REPO_ID:TAG`.
fn repository(repo_id: &str, dir: &Path, source: Source) -> Vec<StoredModel> {
    let files = crate::hub::cache::files_in(dir);
    let models: Vec<Vec<String>> = models_in(&files)
        .into_iter()
        .filter(|parts| is_gguf(&dir.join(&parts[0])))
        .collect();
    let stem = |f: &str| {
        let name = f.rsplit('/').next().unwrap_or(f);
        crate::gguf::SplitName::parse(name)
            .map_or(&name[..name.len() - 5], |s| s.prefix)
            .to_owned()
    };
    let tags: Vec<String> = models
        .iter()
        .map(|parts| quant_tag(&parts[0]).unwrap_or_else(|| stem(&parts[0])))
        .collect();
    models
        .iter()
        .zip(&tags)
        .map(|(parts, tag)| {
            // Two files of one quantization are told apart by name.
            let unique = tags.iter().filter(|t| t.eq_ignore_ascii_case(tag)).count() == 1;
            let tag = if unique { tag.clone() } else { stem(&parts[0]) };
            let files: Vec<PathBuf> = parts.iter().map(|p| dir.join(p)).collect();
            let meta = std::fs::metadata(&files[0]).ok();
            StoredModel {
                name: format!("{repo_id}:{tag}"),
                source,
                size: files
                    .iter()
                    .filter_map(|f| std::fs::metadata(f).ok())
                    .map(|m| m.len())
                    .sum(),
                modified: meta.and_then(|m| m.modified().ok()),
                digest: blob_sha256(&files[0]),
                entry: files[0].clone(),
                files,
            }
        })
        .collect()
}

/// The sha256 a Hugging Face cache link's blob is named by.
fn blob_sha256(file: &Path) -> Option<String> {
    let target = std::fs::read_link(file).ok()?;
    let name = target.file_name()?.to_str()?;
    (name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())).then(|| name.to_owned())
}

/// Removes a model from the Hugging Face cache: its snapshot links, each blob no other link
/// of the repository points to, and the repository when nothing is left in it.
pub fn remove_from_hf_cache(model: &StoredModel) -> Result<(), String> {
    // ROOT/models--O--R/snapshots/COMMIT/<file>: the repository is the folder above snapshots.
    let repo = model
        .files
        .first()
        .and_then(|f| f.ancestors().find(|a| a.ends_with("snapshots")))
        .and_then(Path::parent)
        .ok_or("not in a Hugging Face cache snapshot")?
        .to_path_buf();
    for file in &model.files {
        let blob = std::fs::canonicalize(file).ok();
        std::fs::remove_file(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let Some(blob) = blob.filter(|b| b.starts_with(repo.join("blobs"))) else {
            continue;
        };
        let linked = linked_blobs(&repo.join("snapshots"));
        if !linked.contains(&blob) {
            let _ = std::fs::remove_file(&blob);
        }
    }
    if crate::hub::cache::files_in(&repo.join("snapshots")).is_empty() {
        std::fs::remove_dir_all(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
    }
    Ok(())
}

/// What the links below `dir` point to.
fn linked_blobs(dir: &Path) -> Vec<PathBuf> {
    crate::hub::cache::files_in(dir)
        .iter()
        .filter_map(|f| std::fs::canonicalize(dir.join(f)).ok())
        .collect()
}

/// Removes a model's files from a folder store, and the folders left empty below `root`.
pub fn remove_files(root: &Path, model: &StoredModel) -> Result<(), String> {
    for file in &model.files {
        std::fs::remove_file(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(root) && *d != root) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
    Ok(())
}
