//! A context's worker threads. Unlike a bare rayon pool, dropping [`Workers`] waits for the
//! threads to exit, so after `kolibri_context_free` no Kolibri code is still running (a host
//! may unload the library) and leak checkers see no half-finished threads.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::error::ModelError;

pub(super) struct Workers {
    pool: Option<rayon::ThreadPool>,
    exited: Arc<(Mutex<usize>, Condvar)>,
    n_threads: usize,
}

impl Workers {
    pub fn new(n_threads: usize) -> Result<Workers, ModelError> {
        let exited = Arc::new((Mutex::new(0usize), Condvar::new()));
        let on_exit = Arc::clone(&exited);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n_threads)
            .thread_name(|i| format!("kolibri-{i}"))
            .exit_handler(move |_| {
                let (count, cv) = &*on_exit;
                *count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                cv.notify_all();
            })
            .build()
            .map_err(|e| ModelError::InvalidArgument(format!("cannot start threads: {e}")))?;
        Ok(Workers {
            pool: Some(pool),
            exited,
            n_threads,
        })
    }

    /// Runs `op` on the pool (rayon's parallel iterators inside it use these threads).
    pub fn install<R: Send>(&self, op: impl FnOnce() -> R + Send) -> R {
        self.pool
            .as_ref()
            .expect("pool lives until drop")
            .install(op)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        drop(self.pool.take()); // asks the threads to stop
        let (count, cv) = &*self.exited;
        let guard = count.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: a thread stuck in a host callback must not hang the host's free call.
        let _ = cv.wait_timeout_while(guard, Duration::from_secs(10), |n| *n < self.n_threads);
    }
}
