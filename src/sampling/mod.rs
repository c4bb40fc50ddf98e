//! sampling (work in progress)
