//! A context's persistent worker pool and the parallel loop the kernels use.
//!
//! A forward pass runs a few hundred short parallel loops per token (every matmul, the
//! attention, the activation quantization), each tens of microseconds long. Between loops the
//! workers spin on an atomic epoch instead of sleeping, so starting a loop costs an atomic
//! store rather than a futex wake; after a few milliseconds without work they park. Work is
//! handed out as chunk indices from one atomic counter; the calling thread works too, and
//! waits only for the workers that joined the loop (`pool`). A machine whose other programs
//! keep taking the workers' cores makes the pool run with half its workers (or solo) for a
//! while (`contention`), so a second thread never makes a pass slower than one.
//!
//! [`for_each`] runs on the pool the calling thread has entered with [`Pool::install`], and
//! on rayon's pool otherwise (tests, benches, the loader), so kernels need not know which.
//! Inside a chunk, a nested [`for_each`] runs serially.

use rayon::prelude::*;

mod contention;
mod pool;

pub use pool::Pool;
use pool::{CURRENT, IN_CHUNK};

/// `f(i)` for every `i` in `0..n`, in parallel on the pool this thread has entered (else on
/// rayon's current pool); serially inside a chunk of another loop.
pub fn for_each(n: usize, f: impl Fn(usize) + Sync) {
    if IN_CHUNK.with(|c| c.get()) {
        return (0..n).for_each(f);
    }
    let pool = CURRENT.with(|c| c.get());
    if pool.is_null() {
        if n <= 1 || rayon::current_num_threads() <= 1 {
            (0..n).for_each(f);
        } else {
            (0..n).into_par_iter().for_each(&f);
        }
        return;
    }
    // SAFETY: `CURRENT` is only set by `Pool::install`, which borrows the pool for as long as
    // it is set on this thread.
    unsafe { &*pool }.run(n, &f);
}

/// Runs `op` with every [`for_each`] inside it serial on this thread. For work done while
/// other threads may wait on it (a one-time initialisation): a pool worker blocked on that
/// initialisation could never take a chunk of it.
pub fn serially<R>(op: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_CHUNK.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(IN_CHUNK.with(|c| c.replace(true)));
    op()
}

/// A buffer that parallel tasks write at disjoint places (each task its own rows): a raw
/// pointer, since the borrow checker cannot see that the tasks' ranges do not overlap.
pub struct Disjoint<T>(*mut T);

impl<T> Clone for Disjoint<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Disjoint<T> {}
// SAFETY: tasks touch disjoint elements (the callers' contracts below) and the owner of the
// buffer waits for every task before using it again.
unsafe impl<T: Send> Send for Disjoint<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Disjoint<T> {}

impl<T> Disjoint<T> {
    pub fn new(buf: &mut [T]) -> Self {
        Disjoint(buf.as_mut_ptr())
    }

    /// `len` elements from `at`.
    ///
    /// # Safety
    /// In bounds of the buffer, which outlives the use, and no other live reference to those
    /// elements.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice(&self, at: usize, len: usize) -> &mut [T] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(at), len) }
    }

    /// Writes element `at`.
    ///
    /// # Safety
    /// As [`Disjoint::slice`] for one element.
    pub unsafe fn write(&self, at: usize, v: T) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { self.0.add(at).write(v) }
    }
}

/// Elements below which [`for_each_row`] stays serial: smaller element-wise passes (one
/// token's norm or RoPE) take less than a parallel loop's hand-off.
const ROWS_PARALLEL_MIN: usize = 1 << 15;

/// `f(i, a_row, b_row)` for row `i` of both `a` (rows of `a_len`) and `b` (rows of `b_len`,
/// or none if `b` is empty), in parallel chunks of rows when there is enough work: the
/// per-token element-wise passes of a prompt (norms, RoPE, activations).
pub fn for_each_row<A: Send, B: Send>(
    a: &mut [A],
    a_len: usize,
    b: &mut [B],
    b_len: usize,
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    let n = a.len() / a_len.max(1);
    assert!(
        a.len() == n * a_len && (b.is_empty() || b.len() == n * b_len),
        "for_each_row: row counts differ"
    );
    let b_len = if b.is_empty() { 0 } else { b_len };
    let threads = threads();
    if threads <= 1 || n < 2 || a.len() + b.len() < ROWS_PARALLEL_MIN {
        for i in 0..n {
            let (ra, rb) = (&mut a[i * a_len..][..a_len], &mut b[i * b_len..][..b_len]);
            f(i, ra, rb);
        }
        return;
    }
    // A few chunks per thread, so an uneven one does not leave the others waiting long.
    let chunk = n.div_ceil(4 * threads);
    let (pa, pb) = (Disjoint::new(a), Disjoint::new(b));
    for_each(n.div_ceil(chunk), |c| {
        for i in c * chunk..((c + 1) * chunk).min(n) {
            // SAFETY: row i of each buffer is in bounds (checked above) and only this task
            // touches it; `for_each` returns after every task.
            let (ra, rb) = unsafe { (pa.slice(i * a_len, a_len), pb.slice(i * b_len, b_len)) };
            f(i, ra, rb);
        }
    });
}

/// Threads [`for_each`] would use on this thread.
pub fn threads() -> usize {
    if IN_CHUNK.with(|c| c.get()) {
        return 1;
    }
    let pool = CURRENT.with(|c| c.get());
    if pool.is_null() {
        rayon::current_num_threads().max(1)
    } else {
        // SAFETY: as in `for_each`.
        unsafe { &*pool }.threads()
    }
}

#[cfg(test)]
mod tests {
    use super::pool::SPIN_FOR;
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    #[test]
    fn every_index_runs_once_and_panics_reach_the_caller() {
        let pool = Pool::new(3).unwrap();
        pool.install(|| {
            assert_eq!(threads(), 3);
            for n in [0usize, 1, 2, 7, 1000] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                for_each(n, |i| {
                    // Nested loops run serially inside a chunk.
                    for_each(2, |_| {
                        hits[i].fetch_add(1, Relaxed);
                    });
                });
                assert!(hits.iter().all(|h| h.load(Relaxed) == 2), "n = {n}");
            }
            // After the workers have parked, a loop still wakes them.
            std::thread::sleep(SPIN_FOR * 3);
            let sum = AtomicUsize::new(0);
            for_each(64, |i| {
                sum.fetch_add(i, Relaxed);
            });
            assert_eq!(sum.load(Relaxed), 64 * 63 / 2);
            let r = catch_unwind(AssertUnwindSafe(|| {
                for_each(16, |i| assert!(i != 11, "chunk 11 fails"));
            }));
            assert!(r.is_err());
            // The pool still works after a panic.
            let sum = AtomicUsize::new(0);
            for_each(10, |i| {
                sum.fetch_add(i, Relaxed);
            });
            assert_eq!(sum.load(Relaxed), 45);
        });
        assert_eq!(threads(), rayon::current_num_threads().max(1));
        drop(pool);
    }

    /// A worker held up inside a chunk (as when the scheduler takes its core away) holds up
    /// that loop only: the loops right after it run on the calling thread alone. The solo
    /// spell lasts milliseconds, which a loaded machine (or qemu) can spend between the stall
    /// and the check: a few tries, one of which must see it.
    #[test]
    fn a_stalled_worker_sends_the_next_loops_solo() {
        let pool = Pool::new(2).unwrap();
        let caller = std::thread::current().id();
        let seen_solo = (0..20).any(|_| {
            pool.install(|| {
                let stalled = AtomicUsize::new(0);
                // Until a worker has joined (it may be slow to start), keep offering it chunks.
                while stalled.load(Relaxed) == 0 {
                    for_each(64, |_| {
                        if std::thread::current().id() != caller && stalled.swap(1, Relaxed) == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                    });
                }
                if !pool.runs_solo() {
                    return false;
                }
                let on_workers = AtomicUsize::new(0);
                for_each(8, |_| {
                    if std::thread::current().id() != caller {
                        on_workers.fetch_add(1, Relaxed);
                    }
                });
                on_workers.load(Relaxed) == 0
            })
        });
        assert!(seen_solo, "no loop ran solo after a stalled worker");
    }

    /// With more workers a stall halves the team: the loops right after it take at most half
    /// the workers (a try counts when its loop starts within the spell).
    #[test]
    fn a_stalled_worker_halves_a_larger_team() {
        let pool = Pool::new(5).unwrap();
        let caller = std::thread::current().id();
        let mut in_spell = 0;
        for _ in 0..20 {
            let workers = pool.install(|| {
                let stalled = AtomicUsize::new(0);
                while stalled.load(Relaxed) == 0 {
                    for_each(64, |_| {
                        if std::thread::current().id() != caller && stalled.swap(1, Relaxed) == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                    });
                }
                if pool.team() != 2 {
                    return None;
                }
                let ids = std::sync::Mutex::new(std::collections::HashSet::new());
                for_each(64, |_| {
                    ids.lock().unwrap().insert(std::thread::current().id());
                    std::thread::sleep(std::time::Duration::from_micros(100));
                });
                let ids = ids.into_inner().unwrap();
                Some(ids.len() - usize::from(ids.contains(&caller)))
            });
            if let Some(w) = workers {
                assert!(w <= 2, "{w} of 4 workers joined a loop during a spell of 2");
                in_spell += 1;
            }
        }
        assert!(in_spell > 0, "no loop started within a spell");
    }

    /// Every row of both matrices gets its own call with its own index, in the serial
    /// fallback (small) and in parallel chunks (big, uneven row count), with and without a
    /// second matrix.
    #[test]
    fn for_each_row_visits_each_row_once_with_its_index() {
        let pool = Pool::new(2).unwrap();
        pool.install(|| {
            for (n, a_len) in [(3usize, 4usize), (1001, 64)] {
                let mut a = vec![0u32; n * a_len];
                let mut b = vec![0u64; n * 3];
                for_each_row(&mut a, a_len, &mut b, 3, |i, ra, rb| {
                    ra.iter_mut().for_each(|v| *v += i as u32 + 1);
                    rb.iter_mut().for_each(|v| *v += 2 * i as u64 + 1);
                });
                for i in 0..n {
                    assert!(a[i * a_len..(i + 1) * a_len]
                        .iter()
                        .all(|&v| v == i as u32 + 1));
                    assert!(b[i * 3..(i + 1) * 3].iter().all(|&v| v == 2 * i as u64 + 1));
                }
                let mut none: [u8; 0] = [];
                for_each_row(&mut a, a_len, &mut none, 0, |i, ra, rb| {
                    assert!(rb.is_empty());
                    ra.iter_mut().for_each(|v| *v -= i as u32 + 1);
                });
                assert!(a.iter().all(|&v| v == 0));
            }
        });
    }
}
