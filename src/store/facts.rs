//! What a model file says about itself, read from its GGUF header only (the weights stay on
//! disk): what `kolibri list` shows and Ollama's `/api/tags` and `/api/show` report.

use std::path::Path;

use serde_json::{json, Map, Value};

use crate::gguf::{GgufFile, Value as G};
use crate::quantize::FileType;

/// A model's basic facts.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFacts {
    /// `general.architecture`.
    pub arch: String,
    /// The file type `general.file_type` names (`Q4_K_M`), if it names one.
    pub quant: Option<&'static str>,
    /// The context it was trained for (`ARCH.context_length`).
    pub context: Option<u64>,
    /// Weights, counted over every tensor.
    pub n_params: u64,
    /// Bytes on disk, every part of a split model.
    pub size: u64,
}

/// `qwen2, 494M parameters, Q4_K_M, 380 MiB, trained for 32768 tokens`.
impl std::fmt::Display for ModelFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = self.size as f64 / (1u64 << 20) as f64;
        let params = parameter_size(self.n_params);
        write!(f, "{}, {params} parameters, ", self.arch)?;
        write!(f, "{}, {size:.0} MiB", self.quant.unwrap_or("mixed types"))?;
        match self.context {
            Some(n) => write!(f, ", trained for {n} tokens"),
            None => Ok(()),
        }
    }
}

impl ModelFacts {
    /// The facts of the model at `path` (any part of a split model).
    pub fn read(path: &Path) -> Result<ModelFacts, String> {
        let gguf = GgufFile::open(path).map_err(|e| e.to_string())?;
        Ok(ModelFacts::of(&gguf))
    }

    pub fn of(gguf: &GgufFile) -> ModelFacts {
        let arch = gguf.get_str("general.architecture").unwrap_or("unknown");
        ModelFacts {
            arch: arch.to_owned(),
            quant: gguf
                .get_u64("general.file_type")
                .and_then(|id| u32::try_from(id).ok())
                .and_then(FileType::from_id)
                .map(FileType::name),
            context: gguf.get_u64(&format!("{arch}.context_length")),
            n_params: gguf.tensors().iter().map(|t| t.n_elements()).sum(),
            size: gguf.size_on_disk(),
        }
    }

    /// Ollama's `details` object.
    pub fn details(&self) -> Value {
        json!({
            "parent_model": "",
            "format": "gguf",
            "family": self.arch,
            "families": [self.arch],
            "parameter_size": parameter_size(self.n_params),
            "quantization_level": self.quant.unwrap_or("unknown"),
        })
    }
}

/// What the model can do, as Ollama names it: `completion`; `tools` and `thinking` when its
/// chat template handles them; `mtp` when it carries its own draft layers
/// (`ARCH.nextn_predict_layers`); `rerank` for a reranker (rank pooling).
pub fn capabilities(gguf: &GgufFile) -> Vec<&'static str> {
    let template = gguf.get_str(crate::chat::TEMPLATE_KEY).unwrap_or("");
    let mut capabilities = vec!["completion"];
    if template.contains("tools") {
        capabilities.push("tools");
    }
    if ["<think>", "enable_thinking", "reasoning_content"]
        .iter()
        .any(|t| template.contains(t))
    {
        capabilities.push("thinking");
    }
    let arch = gguf.get_str("general.architecture").unwrap_or("");
    if gguf
        .get_u64(&format!("{arch}.nextn_predict_layers"))
        .is_some_and(|n| n > 0)
    {
        capabilities.push("mtp");
    }
    if gguf.get_u64(&format!("{arch}.pooling_type")) == Some(4) {
        capabilities.push("rerank");
    }
    capabilities
}

/// What Ollama's `/api/show` reports of the model `name` (without `modified_at`).
pub fn describe(gguf: &GgufFile, name: &str, verbose: bool) -> Value {
    let template = gguf.get_str(crate::chat::TEMPLATE_KEY).unwrap_or("");
    let capabilities = capabilities(gguf);
    json!({
        "modelfile": format!("FROM {name}\n"),
        "parameters": "",
        "template": template,
        "details": ModelFacts::of(gguf).details(),
        "model_info": model_info(gguf, verbose),
        "capabilities": capabilities,
    })
}

/// `7.6B`, `268.10M`: as Ollama writes a parameter count.
pub fn parameter_size(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.1}B", n as f64 / 1e9)
    } else {
        format!("{:.2}M", n as f64 / 1e6)
    }
}

/// The GGUF's metadata as Ollama's `/api/show` gives it (`model_info`): every scalar; arrays
/// (the vocabulary) only when `verbose`, else as empty lists.
pub fn model_info(gguf: &GgufFile, verbose: bool) -> Value {
    let mut info = Map::new();
    for (key, value) in gguf.metadata() {
        let v = match value {
            G::Array(_) if !verbose => Value::Array(Vec::new()),
            G::Array(a) => Value::Array(
                (0..a.len())
                    .filter_map(|i| a.get(i).map(|v| scalar(&v)))
                    .collect(),
            ),
            other => scalar(other),
        };
        info.insert(key.clone(), v);
    }
    Value::Object(info)
}

fn scalar(v: &G) -> Value {
    match v {
        G::Bool(b) => json!(b),
        G::String(s) => json!(s),
        G::F32(f) => json!(f),
        G::F64(f) => json!(f),
        G::Array(_) => Value::Null,
        other => other
            .as_i64()
            .map(Value::from)
            .or_else(|| other.as_u64().map(Value::from))
            .unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_sizes_as_ollama_writes_them() {
        assert_eq!(parameter_size(7_615_616_512), "7.6B");
        assert_eq!(parameter_size(268_098_176), "268.10M");
    }
}
