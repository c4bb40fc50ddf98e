//! Whether the pool's workers are being taken off the CPU in the middle of a job.
//!
//! A worker descheduled while it runs a chunk (a busy neighbour shares its core) holds up the
//! whole loop until the scheduler gives it back its core, milliseconds later; the owner can
//! neither take over a started chunk nor return before it ends. When that happens the pool
//! runs its loops with half its workers for a while (with one worker: on the calling thread
//! alone, as fast as one thread, where waiting made two threads slower than one), and halves
//! the team again if the smaller team still stalls. On a machine whose every core is taken
//! (16 threads on 16 cores beside the host's own threads) going solo at the first stall cut
//! generation from 90 to 29 tokens/s; half the team leaves the host a core. The spell doubles
//! while the stalls keep coming back after it and starts short again once they stop.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The shortest spell (one stall on a quiet machine, a host hiccup, costs this much).
const SPELL_MIN: Duration = Duration::from_millis(2);
/// The longest spell: how soon the whole team comes back once the neighbour has gone.
const SPELL_MAX: Duration = Duration::from_millis(256);
/// A wait for workers this much longer than the owner's own chunks took is a stall, not an
/// uneven split (that waits at most about one chunk).
const STALL_SLACK: Duration = Duration::from_micros(200);

pub(super) struct Contention {
    start: Instant,
    /// Microseconds since `start` before which loops run with a smaller team.
    spell_until: AtomicU64,
    /// Length of the last spell, in microseconds.
    spell: AtomicU64,
    /// When the last stall was seen, in microseconds since `start`.
    last_stall: AtomicU64,
    /// How many times the team is halved during the spell.
    halvings: AtomicU32,
}

impl Contention {
    pub fn new() -> Contention {
        Contention {
            start: Instant::now(),
            spell_until: AtomicU64::new(0),
            spell: AtomicU64::new(0),
            last_stall: AtomicU64::new(0),
            halvings: AtomicU32::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// How many of `n_workers` may join the next loop (0: it runs on the calling thread alone).
    pub fn team(&self, n_workers: usize) -> usize {
        self.team_at(self.now(), n_workers)
    }

    fn team_at(&self, now: u64, n_workers: usize) -> usize {
        if self.in_spell(now) {
            n_workers
                .checked_shr(self.halvings.load(Relaxed))
                .unwrap_or(0)
        } else {
            n_workers
        }
    }

    fn in_spell(&self, now: u64) -> bool {
        now < self.spell_until.load(Relaxed)
    }

    /// After a parallel loop in which the owner ran `chunks` chunks in `own` and then waited
    /// `wait` for the workers still inside.
    pub fn observe(&self, own: Duration, chunks: usize, wait: Duration) {
        let chunk = own / chunks.max(1) as u32;
        if wait > 2 * chunk + STALL_SLACK {
            self.stalled_at(self.now());
        }
    }

    /// Starts (or extends) a spell at `now`.
    fn stalled_at(&self, now: u64) {
        let spell = self.spell.load(Relaxed);
        let halvings = self.halvings.load(Relaxed);
        let (spell, halvings) = if self.in_spell(now) {
            // The smaller team stalls too: halve it again.
            (spell, halvings + 1)
        } else if now.saturating_sub(self.last_stall.load(Relaxed)) < 4 * spell {
            // Soon after the spell ended: the neighbour is still there.
            (2 * spell, halvings)
        } else {
            (0, 1)
        };
        let spell = spell.clamp(micros(SPELL_MIN), micros(SPELL_MAX));
        self.spell.store(spell, Relaxed);
        self.halvings.store(halvings.clamp(1, usize::BITS), Relaxed);
        self.last_stall.store(now, Relaxed);
        self.spell_until.store(now + spell, Relaxed);
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
        assert_eq!(c.team(1), 1);
        c.observe(us(40), 4, us(3000));
        assert_eq!(c.team(1), 0);
    }

    #[test]
    fn solo_spells_double_while_stalls_keep_coming_and_reset_when_they_stop() {
        let c = Contention::new();
        let solo_at = |now| c.team_at(now, 1) == 0;
        let (min, max) = (micros(SPELL_MIN), micros(SPELL_MAX));
        c.stalled_at(10 * MS);
        assert!(solo_at(10 * MS + min - 1) && !solo_at(10 * MS + min));
        // The neighbour is still there: each probe stalls soon after the spell ends.
        let mut now = 10 * MS;
        for _ in 0..12 {
            now += c.spell.load(Relaxed) + MS;
            c.stalled_at(now);
        }
        assert_eq!(c.spell.load(Relaxed), max);
        assert!(solo_at(now + max - 1) && !solo_at(now + max));
        // A stall long after the last one is a hiccup: a short spell again.
        now += 10 * max;
        c.stalled_at(now);
        assert_eq!(c.spell.load(Relaxed), min);
    }

    #[test]
    fn a_team_halves_while_it_still_stalls_and_keeps_its_size_after_a_spell() {
        let c = Contention::new();
        let min = micros(SPELL_MIN);
        c.stalled_at(10 * MS);
        assert_eq!(c.team_at(10 * MS, 15), 7);
        // Within the spell the smaller team stalls too.
        c.stalled_at(10 * MS + 100);
        assert_eq!(c.team_at(10 * MS + 200, 15), 3);
        // After the spell the whole team runs; stalling again soon after, the team keeps its
        // size for a longer spell.
        let after = 10 * MS + 100 + min;
        assert_eq!(c.team_at(after, 15), 15);
        c.stalled_at(after + 100);
        assert_eq!(c.team_at(after + 100, 15), 3);
        assert_eq!(c.spell.load(Relaxed), 2 * min);
        // Halvings end at a solo team.
        for i in 0..70 {
            c.stalled_at(after + 200 + i);
        }
        assert_eq!(c.team_at(after + 300, 15), 0);
        assert_eq!(c.team_at(after + 300, usize::MAX), 0);
        // Long after, a hiccup: half the team again.
        c.stalled_at(100_000 * MS);
        assert_eq!(c.team_at(100_000 * MS, 15), 7);
    }
}
