//! One-thread-at-a-time handles: a context or sampler used from two threads at once is a bug
//! in the host program; we detect it and fail the second call instead of racing.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU8, Ordering};

use super::guard::FfiResult;
use super::status::*;

const IDLE: u8 = 0;
const BUSY: u8 = 1;
/// A panic unwound through a call on this handle; its state may be half-updated.
const POISONED: u8 = 2;

pub(crate) struct Exclusive<T> {
    state: AtomicU8,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` goes through `lock`, which admits one thread at a time.
unsafe impl<T: Send> Sync for Exclusive<T> {}

impl<T> Exclusive<T> {
    pub fn new(value: T) -> Self {
        Exclusive {
            state: AtomicU8::new(IDLE),
            value: UnsafeCell::new(value),
        }
    }

    /// Exclusive access for one call, or INVALID_STATE if another thread holds it or an earlier
    /// panic poisoned it.
    pub fn lock(&self, what: &str) -> FfiResult<ExclusiveGuard<'_, T>> {
        match self
            .state
            .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(ExclusiveGuard { owner: self }),
            Err(BUSY) => Err(Failure::new(
                KOLIBRI_STATUS_INVALID_STATE,
                format!("{what} is in use by another thread (use one {what} per thread)"),
            )),
            Err(_) => Err(Failure::new(
                KOLIBRI_STATUS_INVALID_STATE,
                format!("{what} was disabled by an earlier internal panic; free it"),
            )),
        }
    }
}

pub(crate) struct ExclusiveGuard<'a, T> {
    owner: &'a Exclusive<T>,
}

impl<T> std::ops::Deref for ExclusiveGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the BUSY state grants this guard sole access.
        unsafe { &*self.owner.value.get() }
    }
}

impl<T> std::ops::DerefMut for ExclusiveGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the BUSY state grants this guard sole access.
        unsafe { &mut *self.owner.value.get() }
    }
}

impl<T> Drop for ExclusiveGuard<'_, T> {
    fn drop(&mut self) {
        let next = if std::thread::panicking() {
            POISONED
        } else {
            IDLE
        };
        self.owner.state.store(next, Ordering::Release);
    }
}
