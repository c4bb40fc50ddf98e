//! Models by Hugging Face name (`OWNER/REPO[:QUANT]`, llama.cpp's `-hf` convention): the name
//! parsed ([`HubName`]), the GGUF file (with every part of a split one) picked from a
//! repository's listing the way llama.cpp picks it ([`pick`]), and the local cache in the
//! layout the Python `huggingface_hub` package writes ([`HfCache`]), so a model downloaded by
//! either is found by the other. With feature `hub`, [`Hub`] downloads what the cache lacks.

pub(crate) mod cache;
#[cfg(feature = "hub")]
mod download;
mod listing;
mod name;
mod pick;

pub use cache::HfCache;
#[cfg(feature = "hub")]
pub use download::{Hub, Progress, Quiet};
pub use listing::{is_safe_repo_path, ListedFile, Listing};
pub use name::HubName;
pub use pick::{models_in, pick, quant_tag, PickError};
