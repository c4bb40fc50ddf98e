//! model (work in progress)
