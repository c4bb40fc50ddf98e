//! kernels (work in progress)
