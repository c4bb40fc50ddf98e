//! A context's worker threads: a [`crate::parallel::Pool`], whose drop waits for the threads to
//! exit, so after `kolibri_context_free` no Kolibri code is still running (a host may unload
//! the library) and leak checkers see no half-finished threads.

use super::error::ModelError;
use crate::parallel::Pool;

pub(super) struct Workers {
    pool: Pool,
}

impl Workers {
    pub fn new(n_threads: usize) -> Result<Workers, ModelError> {
        let pool = Pool::new(n_threads)
            .map_err(|e| ModelError::InvalidArgument(format!("cannot start threads: {e}")))?;
        Ok(Workers { pool })
    }

    /// The threads its loops run on (the caller's included).
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Runs `op` on this thread, its parallel loops ([`crate::parallel::for_each`]) on the
    /// workers.
    pub fn install<R>(&self, op: impl FnOnce() -> R) -> R {
        self.pool.install(op)
    }
}
