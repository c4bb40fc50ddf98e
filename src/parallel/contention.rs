//! Whether the pool's workers are being taken off the CPU in the middle of a job.
//!
//! A worker descheduled while it runs a chunk (a busy neighbour shares its core) holds up the
//! whole loop until the scheduler gives it back its core, milliseconds later; the owner can
//! neither take over a started chunk nor return before it ends. When that happens the pool
//! runs its loops on the calling thread alone for a while (as fast as one thread, where
//! waiting made two threads slower than one), then tries its workers again. The solo spell
//! doubles while the stalls keep coming and starts short again once they stop.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The shortest solo spell (one stall on a quiet machine, a host hiccup, costs this much).
const SOLO_MIN: Duration = Duration::from_millis(2);
/// The longest solo spell: how soon the workers come back once the neighbour has gone.
const SOLO_MAX: Duration = Duration::from_millis(256);
/// A wait for workers this much longer than the owner's own chunks took is a stall, not an
/// uneven split (that waits at most about one chunk).
const STALL_SLACK: Duration = Duration::from_micros(200);

pub(super) struct Contention {
    start: Instant,
    /// Microseconds since `start` before which loops run solo.
    solo_until: AtomicU64,
    /// Length of the last solo spell, in microseconds.
    spell: AtomicU64,
    /// When the last stall was seen, in microseconds since `start`.
    last_stall: AtomicU64,
}

impl Contention {
    pub fn new() -> Contention {
        Contention {
            start: Instant::now(),
            solo_until: AtomicU64::new(0),
            spell: AtomicU64::new(0),
            last_stall: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Whether the next loop should run on the calling thread alone.
    pub fn solo(&self) -> bool {
        self.solo_at(self.now())
    }

    fn solo_at(&self, now: u64) -> bool {
        now < self.solo_until.load(Relaxed)
    }

    /// After a parallel loop in which the owner ran `chunks` chunks in `own` and then waited
    /// `wait` for the workers still inside.
    pub fn observe(&self, own: Duration, chunks: usize, wait: Duration) {
        let chunk = own / chunks.max(1) as u32;
        if wait > 2 * chunk + STALL_SLACK {
            self.stalled_at(self.now());
        }
    }

    /// Starts a solo spell at `now`.
    fn stalled_at(&self, now: u64) {
        let spell = self.spell.load(Relaxed);
        // Another stall soon after the last spell ended: the neighbour is still there.
        let recent = now.saturating_sub(self.last_stall.load(Relaxed)) < 4 * spell;
        let spell = if recent { 2 * spell } else { 0 };
        let spell = spell.clamp(micros(SOLO_MIN), micros(SOLO_MAX));
        self.spell.store(spell, Relaxed);
        self.last_stall.store(now, Relaxed);
        self.solo_until.store(now + spell, Relaxed);
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000;

    #[test]
    fn only_a_wait_well_past_a_chunk_is_a_stall() {
        let c = Contention::new();
        let us = Duration::from_micros;
        // An uneven split waits about one chunk.
        c.observe(us(4000), 4, us(1000));
        assert!(!c.solo());
        c.observe(us(40), 4, us(3000));
        assert!(c.solo());
    }

    #[test]
    fn solo_spells_double_while_stalls_keep_coming_and_reset_when_they_stop() {
        let c = Contention::new();
        let (min, max) = (micros(SOLO_MIN), micros(SOLO_MAX));
        c.stalled_at(10 * MS);
        assert!(c.solo_at(10 * MS + min - 1) && !c.solo_at(10 * MS + min));
        // The neighbour is still there: each probe stalls soon after the spell ends.
        let mut now = 10 * MS;
        for _ in 0..12 {
            now += c.spell.load(Relaxed) + MS;
            c.stalled_at(now);
        }
        assert_eq!(c.spell.load(Relaxed), max);
        assert!(c.solo_at(now + max - 1) && !c.solo_at(now + max));
        // A stall long after the last one is a hiccup: a short spell again.
        now += 10 * max;
        c.stalled_at(now);
        assert_eq!(c.spell.load(Relaxed), min);
    }
}
