//! An Ollama store, read in place: `ROOT/manifests/HOST/NAMESPACE/MODEL/TAG` (an OCI image
//! manifest, JSON) lists the image's layers by sha256 digest, each stored as
//! `ROOT/blobs/sha256-<hex>`; the layer of media type `application/vnd.ollama.image.model` is
//! the GGUF file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Source, StoredModel};

/// The media type of the layer that is the model's weights.
const MODEL_LAYER: &str = "application/vnd.ollama.image.model";
/// Where `ollama pull NAME` puts a plain name: `registry.ollama.ai/library/NAME/latest`.
const DEFAULT_HOST: &str = "registry.ollama.ai";
const DEFAULT_NAMESPACE: &str = "library";

/// A manifest: its layers (and config) as `(media type, sha256 hex, size)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub layers: Vec<Layer>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub media_type: String,
    /// 64 lowercase hex digits (the digest without `sha256:`).
    pub sha256: String,
    pub size: u64,
}

impl Manifest {
    /// Parses a manifest; a layer whose digest is not `sha256:<64 hex>` makes it invalid (the
    /// digest names a file).
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let layers = v
            .get("layers")
            .and_then(Value::as_array)
            .ok_or("no \"layers\" list")?;
        let config = v.get("config").into_iter().filter(|c| !c.is_null());
        let layers = layers
            .iter()
            .chain(config)
            .map(Layer::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Manifest { layers })
    }

    /// The layer that is the model's GGUF file.
    pub fn model(&self) -> Option<&Layer> {
        self.layers.iter().find(|l| l.media_type == MODEL_LAYER)
    }
}

impl Layer {
    fn parse(v: &Value) -> Result<Layer, String> {
        let media_type = v.get("mediaType").and_then(Value::as_str).unwrap_or("");
        let digest = v.get("digest").and_then(Value::as_str).unwrap_or("");
        let sha256 = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| format!("layer digest {digest:?} is not sha256:<64 hex digits>"))?;
        Ok(Layer {
            media_type: media_type.to_owned(),
            sha256: sha256.to_ascii_lowercase(),
            size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
        })
    }
}

/// The name Ollama shows for `HOST/NAMESPACE/MODEL:TAG`: the default host and namespace left
/// out (`qwen3:8b`, `someone/model:latest`, `hf.co/owner/repo:Q4_K_M`).
pub fn display_name(host: &str, namespace: &str, model: &str, tag: &str) -> String {
    match (host == DEFAULT_HOST, namespace == DEFAULT_NAMESPACE) {
        (true, true) => format!("{model}:{tag}"),
        (true, false) => format!("{namespace}/{model}:{tag}"),
        _ => format!("{host}/{namespace}/{model}:{tag}"),
    }
}

/// The GGUF models of the store at `root`. Manifests that do not parse, have no model layer,
/// or whose model blob is missing or not GGUF (Ollama's own safetensors-based images) are left
/// out.
pub fn list(root: &Path) -> Vec<StoredModel> {
    let mut out = Vec::new();
    for (path, [host, namespace, model, tag]) in manifest_files(root) {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(manifest) = Manifest::parse(&bytes) else {
            continue;
        };
        let Some(layer) = manifest.model() else {
            continue;
        };
        let blob = blob_path(root, &layer.sha256);
        if !super::is_gguf(&blob) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&blob) else {
            continue;
        };
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        out.push(StoredModel {
            name: display_name(&host, &namespace, &model, &tag),
            source: Source::Ollama,
            files: vec![blob],
            size: meta.len(),
            modified,
            digest: Some(layer.sha256.clone()),
            entry: path,
        });
    }
    out
}

/// Removes a model as `ollama rm` does: its manifest, then every blob no other manifest uses.
pub fn remove(root: &Path, model: &StoredModel) -> Result<(), String> {
    let manifest = std::fs::read(&model.entry)
        .map_err(|e| e.to_string())
        .and_then(|b| Manifest::parse(&b))
        .map_err(|e| format!("{}: {e}", model.entry.display()))?;
    std::fs::remove_file(&model.entry).map_err(|e| format!("{}: {e}", model.entry.display()))?;
    let still_used: Vec<String> = manifest_files(root)
        .into_iter()
        .filter_map(|(p, _)| Manifest::parse(&std::fs::read(p).ok()?).ok())
        .flat_map(|m| m.layers.into_iter().map(|l| l.sha256))
        .collect();
    for layer in manifest.layers {
        if !still_used.contains(&layer.sha256) {
            let _ = std::fs::remove_file(blob_path(root, &layer.sha256));
        }
    }
    // Empty folders up to `manifests/` go too, as they do when Ollama removes a model.
    let manifests = root.join("manifests");
    let mut dir = model.entry.parent();
    while let Some(d) = dir.filter(|d| d.starts_with(&manifests) && *d != manifests) {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

fn blob_path(root: &Path, sha256: &str) -> PathBuf {
    root.join("blobs").join(format!("sha256-{sha256}"))
}

/// Every `manifests/HOST/NAMESPACE/MODEL/TAG` file, with its four names.
fn manifest_files(root: &Path) -> Vec<(PathBuf, [String; 4])> {
    let mut found = Vec::new();
    let mut stack = vec![(root.join("manifests"), Vec::<String>::new())];
    while let Some((dir, names)) = stack.pop() {
        for (path, name) in super::entries(&dir) {
            let mut names = names.clone();
            names.push(name);
            match <[String; 4]>::try_from(names) {
                Ok(four) if path.is_file() => found.push((path, four)),
                Ok(_) => {}
                Err(names) if path.is_dir() => stack.push((path, names)),
                Err(_) => {}
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "6e4c38e1172f42fdbff13edf9a7a017679fb82b0fde415a3e8b3c31c6ed4a4e4";

    #[test]
    fn a_manifest_and_its_model_layer() {
        let text = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
            "config":{{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:{c}","size":485}},
            "layers":[{{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:{c}","size":1}},
            {{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:{SHA}","size":42}}]}}"#,
            c = "a".repeat(64)
        );
        let m = Manifest::parse(text.as_bytes()).unwrap();
        assert_eq!(m.layers.len(), 3);
        let model = m.model().unwrap();
        assert_eq!((model.sha256.as_str(), model.size), (SHA, 42));
        for bad in [
            r#"{"layers":[{"mediaType":"x","digest":"sha256:../../etc/passwd"}]}"#,
            r#"{"layers":[{"digest":"md5:00"}]}"#,
            r#"{"layers":{}}"#,
            "[]",
            "{",
        ] {
            assert!(Manifest::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_as_ollama_shows_them() {
        assert_eq!(
            display_name("registry.ollama.ai", "library", "qwen3", "8b"),
            "qwen3:8b"
        );
        assert_eq!(
            display_name("registry.ollama.ai", "me", "m", "latest"),
            "me/m:latest"
        );
        assert_eq!(
            display_name("hf.co", "Qwen", "Qwen3-8B-GGUF", "Q4_K_M"),
            "hf.co/Qwen/Qwen3-8B-GGUF:Q4_K_M"
        );
    }
}
