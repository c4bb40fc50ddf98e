//! The worker pool: `n_threads - 1` workers that spin on an epoch between loops, and the
//! gate through which they join a loop while it still has chunks to hand out.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::contention::Contention;

/// How long an idle worker spins before it parks (a token's loops come microseconds apart).
pub(super) const SPIN_FOR: Duration = Duration::from_millis(2);
/// Pure spinning before the idle worker starts yielding its core between checks.
const YIELD_AFTER: Duration = Duration::from_micros(50);
/// The gate bit that lets workers join the current job.
const OPEN: usize = 1 << (usize::BITS - 1);

/// The loop body of a running job, as a thin pointer to the caller's `&dyn Fn`.
type JobFn<'a> = &'a (dyn Fn(usize) + Sync);

struct Shared {
    /// Bumped by the owner to start a job; workers wait for it to change.
    epoch: AtomicU64,
    /// `*const JobFn` on the owner's stack, valid while the gate counts a worker inside.
    job: AtomicPtr<()>,
    n: AtomicUsize,
    /// Next chunk index to hand out.
    next: AtomicUsize,
    /// [`OPEN`] while workers may join the current job, plus the count of workers inside it.
    /// The owner waits for those only, never for a worker that has not joined: one that is
    /// off the CPU when a job starts is skipped, and the running threads take its chunks.
    gate: AtomicUsize,
    /// Most workers the current job takes (fewer while workers stall: `contention`).
    team: AtomicUsize,
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
    /// The worker threads (the caller's thread is the pool's other member). Joined on drop
    /// once the workers say they exited, so their thread-exit work (std's and libc's
    /// thread-local destructors) is over before the pool is gone.
    handles: Vec<std::thread::JoinHandle<()>>,
    contention: Contention,
}

thread_local! {
    /// The pool this thread has entered, if any.
    pub(super) static CURRENT: Cell<*const Pool> = const { Cell::new(std::ptr::null()) };
    /// Set while this thread runs a chunk, so nested loops stay serial.
    pub(super) static IN_CHUNK: Cell<bool> = const { Cell::new(false) };
}

impl Pool {
    /// Starts `n_threads - 1` workers (none for 0 or 1).
    pub fn new(n_threads: usize) -> std::io::Result<Pool> {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            n: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            gate: AtomicUsize::new(0),
            team: AtomicUsize::new(0),
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
            handles: Vec::new(),
            contention: Contention::new(),
        };
        for i in 1..n_threads.max(1) {
            let sh = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("kolibri-{i}"))
                .spawn(move || worker(&sh))?;
            // Counted as they start, so a failed spawn leaves a pool that drops cleanly.
            pool.handles.push(handle);
        }
        Ok(pool)
    }

    /// Threads that run a loop (the workers and the caller).
    pub fn threads(&self) -> usize {
        self.handles.len() + 1
    }

    /// Whether loops run on the calling thread alone just now.
    #[cfg(test)]
    pub(super) fn runs_solo(&self) -> bool {
        self.team() == 0
    }

    /// Workers that may join a loop just now.
    #[cfg(test)]
    pub(super) fn team(&self) -> usize {
        self.contention.team(self.handles.len())
    }

    /// Runs `op` on this thread with [`super::for_each`] served by this pool.
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
    pub(super) fn run(&self, n: usize, f: JobFn<'_>) {
        let sh = &*self.shared;
        let team = self.contention.team(self.handles.len());
        if team == 0 || n <= 1 || sh.busy.swap(true, Acquire) {
            (0..n).for_each(f);
            return;
        }
        struct Unbusy<'a>(&'a AtomicBool);
        impl Drop for Unbusy<'_> {
            fn drop(&mut self) {
                self.0.store(false, Release);
            }
        }
        let _busy = Unbusy(&sh.busy);
        // The gate is closed with nobody inside (the last job waited for that), so the job's
        // fields can be rewritten before it opens; the epoch then wakes the workers.
        sh.job.store(&f as *const JobFn as *mut (), Relaxed);
        sh.n.store(n, Relaxed);
        sh.next.store(0, Relaxed);
        sh.team.store(team, Relaxed);
        sh.gate.store(OPEN, Release);
        sh.epoch.fetch_add(1, SeqCst);
        if sh.sleeping.load(SeqCst) > 0 {
            let _g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
            sh.wake.notify_all();
        }
        let start = Instant::now();
        let chunks = work(sh, f, n);
        let own = start.elapsed();
        // Every chunk is taken: close the gate, then wait for the workers still running one
        // (`f` lives on this frame), yielding so one that shares this core can finish.
        sh.gate.fetch_and(!OPEN, AcqRel);
        let mut spins = 0u32;
        while sh.gate.load(Acquire) != 0 {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1 << 8) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        self.contention.observe(own, chunks, start.elapsed() - own);
        let panic = sh.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = panic {
            resume_unwind(p);
        }
    }
}

/// Chunks of the current job until none are left (a panic is kept for the owner); returns
/// how many this thread ran.
fn work(sh: &Shared, f: JobFn<'_>, n: usize) -> usize {
    let mut ran = 0;
    loop {
        let i = sh.next.fetch_add(1, Relaxed);
        if i >= n {
            return ran;
        }
        ran += 1;
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

/// Joins the open job, if any: counts this worker in before it reads the job, so the owner
/// cannot rewrite the job while it runs. A job opened after the epoch this worker saw is
/// joined just the same (chunks are claimed one by one, so joining a job twice is harmless).
fn join(sh: &Shared) -> bool {
    let mut g = sh.gate.load(Acquire);
    // The team size read here may be the last job's if this job opened meanwhile: it only
    // sizes the team, the gate alone decides whether the job is open.
    while g & OPEN != 0 && g & !OPEN < sh.team.load(Relaxed) {
        match sh.gate.compare_exchange_weak(g, g + 1, Acquire, Relaxed) {
            Ok(_) => return true,
            Err(now) => g = now,
        }
    }
    false
}

fn worker(sh: &Shared) {
    let mut seen = 0u64;
    while let Some(epoch) = next_epoch(sh, seen) {
        seen = epoch;
        if !join(sh) {
            continue;
        }
        let job = sh.job.load(Relaxed) as *const JobFn;
        // SAFETY: joining (an Acquire of the gate the owner opened with Release after writing
        // `job` and `n`) published them, and the owner keeps the `JobFn` alive until this
        // worker leaves the gate below.
        let f = unsafe { *job };
        work(sh, f, sh.n.load(Relaxed));
        sh.gate.fetch_sub(1, Release);
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
        let (sh, n_workers) = (&*self.shared, self.handles.len());
        sh.stop.store(true, Release);
        {
            let _g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
            sh.wake.notify_all();
        }
        let exited = sh.exited.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: a worker stuck in a host callback must not hang the host's free call.
        let (exited, _) = sh
            .exited_cv
            .wait_timeout_while(exited, Duration::from_secs(10), |n| *n < n_workers)
            .unwrap_or_else(|e| e.into_inner());
        let all_exited = *exited == n_workers;
        drop(exited);
        if all_exited {
            // They have left their loops: joining waits only for their thread-exit work (a
            // host may unload the library right after freeing its contexts).
            self.handles.drain(..).for_each(|h| drop(h.join()));
        }
    }
}
