//! tokenizer (work in progress)
