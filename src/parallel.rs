//! A context's persistent worker pool and the parallel loop the kernels use.
//!
//! A forward pass runs a few hundred short parallel loops per token (every matmul, the
//! attention, the activation quantization), each tens of microseconds long. Between loops the
//! workers spin on an atomic epoch instead of sleeping, so starting a loop costs an atomic
//! store rather than a futex wake; after [`SPIN_FOR`] without work they park on a condvar.
//! Work is handed out as chunk indices from one atomic counter; the calling thread works too.
//!
//! [`for_each`] runs on the pool the calling thread has entered with [`Pool::install`], and
//! on rayon's pool otherwise (tests, benches, the loader), so kernels need not know which.
//! Inside a chunk, a nested [`for_each`] runs serially.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;

/// How long an idle worker spins before it parks (a token's loops come microseconds apart).
const SPIN_FOR: Duration = Duration::from_millis(2);
/// Pure spinning before the idle worker starts yielding its core between checks.
const YIELD_AFTER: Duration = Duration::from_micros(50);

/// The loop body of a running job, as a thin pointer to the caller's `&dyn Fn`.
type JobFn<'a> = &'a (dyn Fn(usize) + Sync);

struct Shared {
    /// Bumped by the owner to start a job; workers wait for it to change.
    epoch: AtomicU64,
    /// `*const JobFn` on the owner's stack, valid until every worker has finished the epoch.
    job: AtomicPtr<()>,
    n: AtomicUsize,
    /// Next chunk index to hand out.
    next: AtomicUsize,
    /// Workers done with the current epoch.
    finished: AtomicUsize,
    /// Workers parked (or about to park) on `wake`.
    sleeping: AtomicUsize,
    stop: AtomicBool,
    /// Held by the thread running a job (a pool entered on two threads runs one job at a
    /// time; the other thread's loop runs serially).
    busy: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// The first panic of a job's chunks, re-raised on the owner's thread.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Workers that have exited (checked by `Drop`).
    exited: Mutex<usize>,
    exited_cv: Condvar,
}

/// `n_threads - 1` worker threads plus the thread that runs the loops.
pub struct Pool {
    shared: Arc<Shared>,
    n_workers: usize,
}

thread_local! {
    /// The pool this thread has entered, if any.
    static CURRENT: Cell<*const Pool> = const { Cell::new(std::ptr::null()) };
    /// Set while this thread runs a chunk, so nested loops stay serial.
    static IN_CHUNK: Cell<bool> = const { Cell::new(false) };
}

impl Pool {
    /// Starts `n_threads - 1` workers (none for 0 or 1).
    pub fn new(n_threads: usize) -> std::io::Result<Pool> {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            n: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            panic: Mutex::new(None),
            exited: Mutex::new(0),
            exited_cv: Condvar::new(),
        });
        let mut pool = Pool {
            shared,
            n_workers: 0,
        };
        for i in 1..n_threads.max(1) {
            let sh = Arc::clone(&pool.shared);
            std::thread::Builder::new()
                .name(format!("kolibri-{i}"))
                .spawn(move || worker(&sh))?;
            // Counted as they start, so a failed spawn leaves a pool that drops cleanly.
            pool.n_workers += 1;
        }
        Ok(pool)
    }

    /// Threads that run a loop (the workers and the caller).
    pub fn threads(&self) -> usize {
        self.n_workers + 1
    }

    /// Runs `op` on this thread with [`for_each`] served by this pool.
    pub fn install<R>(&self, op: impl FnOnce() -> R) -> R {
        struct Restore(*const Pool);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(self)));
        op()
    }

    /// `f(i)` for every `i` in `0..n`, spread over the pool; returns when all are done.
    fn run(&self, n: usize, f: JobFn<'_>) {
        let sh = &*self.shared;
        if self.n_workers == 0 || n <= 1 || sh.busy.swap(true, Acquire) {
            (0..n).for_each(f);
            return;
        }
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, std::sync::atomic::Ordering::Release);
            }
        }
        let _busy = Release(&sh.busy);
        // No worker is inside a job here (the last one waited for all of them), so the
        // job's fields can be rewritten before the epoch publishes them.
        sh.job.store(&f as *const JobFn as *mut (), Relaxed);
        sh.n.store(n, Relaxed);
        sh.next.store(0, Relaxed);
        sh.finished.store(0, Relaxed);
        sh.epoch.fetch_add(1, SeqCst);
        if sh.sleeping.load(SeqCst) > 0 {
            let _g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
            sh.wake.notify_all();
        }
        work(sh, f, n);
        // `f` lives on this frame: wait until no worker can still be calling it.
        let mut spins = 0u32;
        while sh.finished.load(Acquire) < self.n_workers {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1 << 12) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let panic = sh.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = panic {
            resume_unwind(p);
        }
    }
}

/// Chunks of the current job until none are left; a panic is kept for the owner.
fn work(sh: &Shared, f: JobFn<'_>, n: usize) {
    loop {
        let i = sh.next.fetch_add(1, Relaxed);
        if i >= n {
            return;
        }
        IN_CHUNK.with(|c| c.set(true));
        let r = catch_unwind(AssertUnwindSafe(|| f(i)));
        IN_CHUNK.with(|c| c.set(false));
        if let Err(p) = r {
            let mut slot = sh.panic.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(p);
            // The other chunks still run: the owner re-raises once all are done.
        }
    }
}

fn worker(sh: &Shared) {
    let mut seen = 0u64;
    while let Some(epoch) = next_epoch(sh, seen) {
        seen = epoch;
        let job = sh.job.load(Relaxed) as *const JobFn;
        // SAFETY: the epoch's SeqCst bump (observed above) published `job` and `n`, and the
        // owner keeps the `JobFn` alive until this worker counts itself finished below.
        let f = unsafe { *job };
        work(sh, f, sh.n.load(Relaxed));
        sh.finished.fetch_add(1, Release);
    }
    let mut exited = sh.exited.lock().unwrap_or_else(|e| e.into_inner());
    *exited += 1;
    sh.exited_cv.notify_all();
}

/// Waits for an epoch after `seen`: spins for [`SPIN_FOR`], then parks. `None` on stop.
fn next_epoch(sh: &Shared, seen: u64) -> Option<u64> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if sh.stop.load(Acquire) {
            return None;
        }
        let e = sh.epoch.load(SeqCst);
        if e != seen {
            return Some(e);
        }
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(256) {
            std::hint::spin_loop();
            continue;
        }
        let idle = start.elapsed();
        if idle < SPIN_FOR {
            // Past the first moments, yield while spinning: threads of other contexts (or
            // the host) sharing this core still run.
            if idle > YIELD_AFTER {
                std::thread::yield_now();
            }
            continue;
        }
        // Park. Registering before the re-check under the lock means the owner, which bumps
        // the epoch before reading `sleeping`, either sees this worker or is seen by it.
        sh.sleeping.fetch_add(1, SeqCst);
        let mut g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
        while sh.epoch.load(SeqCst) == seen && !sh.stop.load(Acquire) {
            g = sh.wake.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        drop(g);
        sh.sleeping.fetch_sub(1, SeqCst);
        spins = 0;
    }
}

impl Drop for Pool {
    /// Stops the workers and waits for them to exit, so no pool thread outlives the pool
    /// (a host may unload the library after freeing its contexts).
    fn drop(&mut self) {
        let sh = &*self.shared;
        sh.stop.store(true, Release);
        {
            let _g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
            sh.wake.notify_all();
        }
        let exited = sh.exited.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: a worker stuck in a host callback must not hang the host's free call.
        let _ = sh
            .exited_cv
            .wait_timeout_while(exited, Duration::from_secs(10), |n| *n < self.n_workers);
    }
}

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
    use super::*;

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
