//! gguf (work in progress)
