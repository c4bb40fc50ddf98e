//! The per-sequence memory of recurrent token mixers (see [`RecurrentMixer`]): a fixed-size
//! f32 state per sequence and layer instead of KV rows.
//!
//! A state cannot be truncated back to an earlier position the way KV rows can, so the memory
//! also keeps, per sequence, the states after each of its last [`REWIND_DEPTH`] tokens
//! (recorded as a pass computes them). Rewinding into that span (a rejected speculative tail,
//! a failed or cancelled pass) restores an exact earlier state; rewinding further keeps the
//! longest prefix whose state is known, and the caller evaluates the rest again.
//!
//! [`RecurrentMixer`]: crate::model::RecurrentMixer

use std::collections::VecDeque;
use std::ops::Range;

use super::error::ModelError;
use super::hparams::{DeltaNetShape, HParams, MixerKind};

/// Tokens back from a sequence's end whose states are kept for exact rewinds: more than a
/// speculative verification adds (the pending token and up to 32 drafts). Large states keep
/// fewer ([`Limits`]).
pub(crate) const REWIND_DEPTH: usize = 40;

/// Checkpoints kept per sequence ([`RecurrentMemory::checkpoint`]); beyond it they are thinned
/// out. Large states keep fewer ([`Limits`]).
pub(crate) const MAX_CHECKPOINTS: usize = 8;

/// Bytes of snapshots (rewind states and checkpoints) a sequence keeps at most, where its
/// state is so large (a big delta-net model's: tens of MiB) that the full counts would not fit.
const SNAPSHOT_BYTES: usize = 512 << 20;

/// The fewest rewind states kept whatever their size: a verification of 8 drafts.
const MIN_REWIND_DEPTH: usize = 9;

/// How many snapshots a sequence keeps, given its state's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Tokens back whose states are kept: a rewind this far is exact.
    pub rewind_depth: usize,
    pub checkpoints: usize,
}

impl Limits {
    pub fn for_state(state_bytes: usize) -> Limits {
        let fit = |share: usize| SNAPSHOT_BYTES / share / state_bytes.max(1);
        Limits {
            rewind_depth: fit(2).clamp(MIN_REWIND_DEPTH, REWIND_DEPTH),
            checkpoints: fit(4).clamp(2, MAX_CHECKPOINTS),
        }
    }
}

/// Positions, in tokens, at whose multiples a pass keeps a checkpoint: a later request that
/// shares a prefix (a system prompt) then evaluates at most this many of its tokens again.
pub(crate) const CHECKPOINT_INTERVAL: usize = 64;

/// A sequence's whole recurrent state (every recurrent layer's, concatenated) after its first
/// `held` tokens.
#[derive(Clone)]
pub struct Snapshot {
    held: usize,
    state: Box<[f32]>,
}

pub struct RecurrentMemory {
    /// Per layer: where its state sits in a sequence's state (`None`: the layer attends).
    layers: Vec<Option<Range<usize>>>,
    /// Floats of one sequence's state.
    len: usize,
    limits: Limits,
    /// Per sequence: the state after its last token, which the forward pass updates.
    states: Vec<Vec<f32>>,
    /// Per sequence: the states after its last tokens, oldest first; the last one is the
    /// state `states` held when the last pass ended.
    history: Vec<VecDeque<Snapshot>>,
    /// Per sequence, during a pass: the snapshots the pass records, by position: its last
    /// tokens', then the checkpoints it keeps.
    pending: Vec<Vec<Snapshot>>,
    /// Per sequence, during a pass: how many of `pending` go to the history.
    pending_recent: Vec<usize>,
    /// Per sequence: states kept at chosen positions (the end of a prompt), oldest first, so a
    /// later request sharing that prefix does not evaluate it again.
    checkpoints: Vec<VecDeque<Snapshot>>,
    /// Snapshot buffers no longer in use, for the next pass: a decode step's snapshot is a
    /// fresh allocation otherwise (megabytes of pages the kernel zeroes, every token).
    spare: Vec<Box<[f32]>>,
}

/// Floats of layer `il`'s state per sequence (0: no state).
pub fn layer_state_len(hp: &HParams, il: usize) -> usize {
    match hp.mixers[il] {
        MixerKind::Attention => 0,
        // The inputs of the last `kernel - 1` positions, each [n_embd].
        MixerKind::ShortConv => (hp.conv_kernel - 1) * hp.n_embd,
        // The convolution's last `kernel - 1` inputs, then per value head its state.
        MixerKind::DeltaNet => {
            let d = hp
                .delta_net
                .expect("delta-net layers have a delta-net shape");
            delta_net_conv_len(&d) + d.n_v_heads * d.head_v * d.head_k
        }
    }
}

/// Floats of a delta-net layer's convolution state (its state's first part).
pub fn delta_net_conv_len(d: &DeltaNetShape) -> usize {
    (d.conv_kernel - 1) * d.conv_dim()
}

/// Bytes of one sequence's recurrent state with its rewind snapshots and checkpoints, at
/// most (for budgets).
pub fn seq_bytes(hp: &HParams) -> usize {
    let bytes = 4
        * (0..hp.n_layer)
            .map(|il| layer_state_len(hp, il))
            .sum::<usize>();
    let limits = Limits::for_state(bytes);
    bytes * (limits.rewind_depth + 2 + limits.checkpoints)
}

impl RecurrentMemory {
    pub fn new(hp: &HParams, n_seq: usize) -> Result<RecurrentMemory, ModelError> {
        let mut len = 0;
        let layers = (0..hp.n_layer)
            .map(|il| {
                let n = layer_state_len(hp, il);
                let range = (n > 0).then(|| len..len + n);
                len += n;
                range
            })
            .collect();
        let total = seq_bytes(hp).checked_mul(n_seq);
        if total.is_none_or(|b| b > isize::MAX as usize / 2) {
            return Err(ModelError::OutOfMemory(format!(
                "recurrent states for {n_seq} sequences overflow the address space"
            )));
        }
        Ok(Self::with_layers(layers, len, n_seq))
    }

    /// Empty sequences over layers whose states sit at `layers` in `len` floats.
    fn with_layers(layers: Vec<Option<Range<usize>>>, len: usize, n_seq: usize) -> Self {
        let mut memory = RecurrentMemory {
            layers,
            len,
            limits: Limits::for_state(4 * len),
            states: vec![Vec::new(); n_seq],
            history: vec![VecDeque::new(); n_seq],
            pending: vec![Vec::new(); n_seq],
            pending_recent: vec![0; n_seq],
            checkpoints: vec![VecDeque::new(); n_seq],
            spare: Vec::new(),
        };
        (0..n_seq).for_each(|seq| memory.reset(seq));
        memory
    }

    /// Whether the model has recurrent layers at all.
    pub fn is_used(&self) -> bool {
        self.len > 0
    }

    /// Floats of one sequence's state.
    pub fn state_len(&self) -> usize {
        self.len
    }

    /// Tokens back from a sequence's end to which a rewind is exact (`usize::MAX` without
    /// recurrent layers).
    pub fn rewind_depth(&self) -> usize {
        if self.is_used() {
            self.limits.rewind_depth
        } else {
            usize::MAX
        }
    }

    /// Layer `il`'s state of sequence `seq`, as the forward pass reads and updates it.
    pub fn layer_state(&mut self, seq: usize, il: usize) -> &mut [f32] {
        let range = self.layers[il].clone().expect("a recurrent layer");
        &mut self.states[seq][range]
    }

    /// Starts a pass that appends `added[seq]` tokens to sequences holding `held[seq]`: the
    /// states after the last [`REWIND_DEPTH`] of each sequence's new tokens will be recorded,
    /// and checkpoints kept at multiples of [`CHECKPOINT_INTERVAL`] and, for a prompt (more
    /// than one token), one before its end (where a request resending it resumes).
    pub fn begin_pass(&mut self, held: &[usize], added: &[usize]) {
        if !self.is_used() {
            return;
        }
        for seq in 0..self.pending.len() {
            let (h, a) = (held[seq], added[seq]);
            let recent = h + a - a.min(self.limits.rewind_depth) + 1..=h + a;
            let interval = (h / CHECKPOINT_INTERVAL + 1..=(h + a) / CHECKPOINT_INTERVAL)
                .map(|i| i * CHECKPOINT_INTERVAL);
            let before_end = (a > 1).then_some(h + a - 1);
            let mut kept: Vec<usize> = interval.chain(before_end).collect();
            kept.sort_unstable();
            kept.dedup();
            self.pending_recent[seq] = recent.clone().count();
            // Every recurrent layer records its part at each of these positions, so a reused
            // buffer's old contents are all overwritten.
            let pending: Vec<Snapshot> = (recent.chain(kept))
                .map(|held| Snapshot {
                    held,
                    state: self.buffer(),
                })
                .collect();
            self.pending[seq] = pending;
        }
    }

    /// A snapshot buffer: a spare one, else a new one.
    fn buffer(&mut self) -> Box<[f32]> {
        (self.spare.pop()).unwrap_or_else(|| vec![0.0; self.len].into())
    }

    /// Keeps a snapshot's buffer for a later pass (a few of them).
    fn recycle(&mut self, s: Snapshot) {
        if self.spare.len() < 2 * MIN_REWIND_DEPTH {
            self.spare.push(s.state);
        }
    }

    /// Records part `part` of layer `il`'s state of sequence `seq` after its first `held`
    /// tokens, where the pass keeps that position (a layer may move its parts on at different
    /// times).
    pub fn record_part(&mut self, seq: usize, il: usize, held: usize, part: Range<usize>) {
        let layer = self.layers[il].clone().expect("a recurrent layer");
        let range = layer.start + part.start..layer.start + part.end;
        let state = &self.states[seq][range.clone()];
        for snapshot in self.pending[seq].iter_mut().filter(|s| s.held == held) {
            snapshot.state[range.clone()].copy_from_slice(state);
        }
    }

    /// The positions (tokens held) at which the pass in progress records sequence `seq`'s
    /// state, in order.
    pub fn recorded_positions(&self, seq: usize) -> Vec<usize> {
        let mut held: Vec<usize> = self.pending[seq].iter().map(|s| s.held).collect();
        held.sort_unstable();
        held.dedup();
        held
    }

    /// Keeps what the pass recorded.
    pub fn end_pass(&mut self) {
        for seq in 0..self.pending.len() {
            let mut pending = std::mem::take(&mut self.pending[seq]);
            let kept = pending.split_off(self.pending_recent[seq]);
            self.history[seq].extend(pending);
            while self.history[seq].len() > self.limits.rewind_depth + 1 {
                let oldest = self.history[seq].pop_front().expect("not empty");
                self.recycle(oldest);
            }
            for s in kept {
                self.keep_checkpoint(seq, s);
            }
        }
    }

    /// Forgets a pass that failed: every sequence's state is the one before it.
    pub fn abandon_pass(&mut self) {
        for seq in 0..self.states.len() {
            self.pending[seq].clear();
            if let Some(last) = self.history[seq].back() {
                self.states[seq].copy_from_slice(&last.state);
            }
        }
    }

    /// Rewinds sequence `seq` (holding `held` tokens) to at most `n` tokens: to `n` if its state
    /// there is known (a recent token's, or a checkpoint's), else to the longest shorter
    /// prefix whose state is (0 at worst). Returns the tokens kept.
    pub fn truncate(&mut self, seq: usize, held: usize, n: usize) -> usize {
        if !self.is_used() || n >= held {
            return n.min(held);
        }
        let mut dropped = Vec::new();
        while self.history[seq].back().is_some_and(|s| s.held > n) {
            dropped.extend(self.history[seq].pop_back());
        }
        dropped.into_iter().for_each(|s| self.recycle(s));
        self.checkpoints[seq].retain(|s| s.held <= n);
        // A checkpoint later than every recent state: the sequence resumes from it.
        let recent = self.history[seq].back().map(|s| s.held);
        let checkpoint = (self.checkpoints[seq].back())
            .filter(|c| recent.is_none_or(|r| c.held > r))
            .cloned();
        if let Some(c) = checkpoint {
            self.states[seq].copy_from_slice(&c.state);
            let held = c.held;
            self.history[seq] = VecDeque::from([c]);
            return held;
        }
        match self.history[seq].back() {
            Some(h) => {
                self.states[seq].copy_from_slice(&h.state);
                h.held
            }
            None => {
                self.reset(seq);
                0
            }
        }
    }

    /// Keeps sequence `seq`'s current state (after its first `held` tokens) as a checkpoint.
    pub fn checkpoint(&mut self, seq: usize, held: usize) {
        if self.is_used() {
            let snapshot = self.snapshot(seq, held);
            self.keep_checkpoint(seq, snapshot);
        }
    }

    /// Adds a checkpoint, replacing one at the same position; beyond the limit one goes, so
    /// that they stay spread over the sequence.
    fn keep_checkpoint(&mut self, seq: usize, snapshot: Snapshot) {
        let checkpoints = &mut self.checkpoints[seq];
        checkpoints.retain(|s| s.held != snapshot.held);
        let at = checkpoints.partition_point(|s| s.held < snapshot.held);
        checkpoints.insert(at, snapshot);
        if checkpoints.len() > self.limits.checkpoints.max(2) {
            // The inner one whose removal leaves the smallest gap: the first and the newest
            // stay.
            let thinnest = (1..checkpoints.len() - 1)
                .min_by_key(|&i| checkpoints[i + 1].held - checkpoints[i - 1].held)
                .expect("more than two checkpoints");
            checkpoints.remove(thinnest);
        }
    }

    /// Sequence `seq`'s current state, as after its first `held` tokens.
    pub fn snapshot(&self, seq: usize, held: usize) -> Snapshot {
        Snapshot {
            held,
            state: self.states[seq].as_slice().into(),
        }
    }

    /// Puts back a state taken by [`RecurrentMemory::snapshot`]: the sequence holds its
    /// `held` tokens again, and later snapshots are gone.
    pub fn restore(&mut self, seq: usize, s: Snapshot) {
        self.states[seq].copy_from_slice(&s.state);
        self.history[seq].retain(|h| h.held < s.held);
        self.checkpoints[seq].retain(|h| h.held <= s.held);
        self.history[seq].push_back(s);
    }

    /// Sequence `seq` empty: a zero state.
    pub fn reset(&mut self, seq: usize) {
        self.states[seq] = vec![0.0; self.len];
        self.checkpoints[seq].clear();
        self.history[seq] = VecDeque::from([Snapshot {
            held: 0,
            state: vec![0.0; self.len].into(),
        }]);
    }

    /// Makes sequence `dst`'s state (and its rewind snapshots) a copy of `src`'s.
    pub fn copy_seq(&mut self, src: usize, dst: usize) {
        if src != dst {
            self.states[dst] = self.states[src].clone();
            self.history[dst] = self.history[src].clone();
            self.checkpoints[dst] = self.checkpoints[src].clone();
        }
    }

    /// After a context shift dropped `n_discard` tokens after the first `n_keep`: the state
    /// stays (it is position-free, and keeps what the dropped tokens contributed); snapshots
    /// after the dropped run move down, those inside it are gone.
    pub fn shift(&mut self, seq: usize, n_keep: usize, n_discard: usize) {
        let moved = |list: VecDeque<Snapshot>| {
            (list.into_iter())
                .filter_map(|mut s| {
                    if s.held > n_keep + n_discard {
                        s.held -= n_discard;
                    } else if s.held > n_keep {
                        return None;
                    }
                    Some(s)
                })
                .collect()
        };
        self.history[seq] = moved(std::mem::take(&mut self.history[seq]));
        self.checkpoints[seq] = moved(std::mem::take(&mut self.checkpoints[seq]));
    }

    /// Sequence `seq`'s current state, for saving.
    pub fn seq_state(&self, seq: usize) -> &[f32] {
        &self.states[seq]
    }

    /// Sequence `seq`'s checkpoints (positions and states), oldest first, for saving.
    pub fn seq_checkpoints(&self, seq: usize) -> impl Iterator<Item = (usize, &[f32])> {
        self.checkpoints[seq].iter().map(|c| (c.held, &*c.state))
    }

    /// Adds a loaded checkpoint of sequence `seq`.
    pub fn add_checkpoint(&mut self, seq: usize, held: usize, state: &[f32]) {
        self.keep_checkpoint(
            seq,
            Snapshot {
                held,
                state: state.into(),
            },
        );
    }

    /// Sets sequence `seq`'s state after its first `held` tokens (a loaded state).
    pub fn set_seq_state(&mut self, seq: usize, held: usize, state: &[f32]) {
        self.states[seq].copy_from_slice(state);
        self.checkpoints[seq].clear();
        self.history[seq] = VecDeque::from([Snapshot {
            held,
            state: state.into(),
        }]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory of one 2-float layer for `n_seq` sequences (no model needed).
    fn memory(n_seq: usize) -> RecurrentMemory {
        RecurrentMemory::with_layers(vec![Some(0..2)], 2, n_seq)
    }

    /// Appends `n` tokens to sequence 0 (holding `held`) in one pass; the state after token
    /// `t` is `[t, t]`.
    fn pass(m: &mut RecurrentMemory, held: usize, n: usize) {
        let (mut h, mut a) = (vec![0; m.states.len()], vec![0; m.states.len()]);
        (h[0], a[0]) = (held, n);
        m.begin_pass(&h, &a);
        for t in held + 1..=held + n {
            m.layer_state(0, 0).fill(t as f32);
            m.record_part(0, 0, t, 0..2);
        }
        m.end_pass();
    }

    #[test]
    fn rewinds_restore_recent_states_and_checkpoints() {
        let mut m = memory(1);
        pass(&mut m, 0, 300);
        // Recent tokens: exact.
        assert_eq!(m.truncate(0, 300, 290), 290);
        assert_eq!(m.seq_state(0), [290.0, 290.0]);
        // Further back: the checkpoint at a multiple of the interval below.
        assert_eq!(m.truncate(0, 290, 200), 192);
        assert_eq!(m.seq_state(0), [192.0, 192.0]);
        // Before every snapshot: the empty state.
        assert_eq!(m.truncate(0, 192, 10), 0);
        assert_eq!(m.seq_state(0), [0.0, 0.0]);
    }

    #[test]
    fn a_failed_pass_leaves_the_state_before_it() {
        let mut m = memory(1);
        pass(&mut m, 0, 5);
        m.begin_pass(&[5], &[3]);
        m.layer_state(0, 0).fill(99.0);
        m.record_part(0, 0, 6, 0..2);
        m.abandon_pass();
        assert_eq!(m.seq_state(0), [5.0, 5.0]);
        assert_eq!(m.truncate(0, 5, 4), 4);
    }

    #[test]
    fn checkpoints_stay_spread_when_thinned() {
        let mut m = memory(1);
        let cap = m.limits.checkpoints;
        for held in (1..=4 * cap).map(|i| i * 10) {
            m.layer_state(0, 0).fill(held as f32);
            m.checkpoint(0, held);
        }
        let kept: Vec<usize> = m.checkpoints[0].iter().map(|s| s.held).collect();
        assert_eq!(kept.len(), cap);
        assert_eq!(
            kept[0], 10,
            "the earliest (a shared system prompt's) stays: {kept:?}"
        );
        assert_eq!(*kept.last().unwrap(), 40 * cap, "{kept:?}");
    }

    #[test]
    fn large_states_keep_fewer_snapshots() {
        assert_eq!(Limits::for_state(4096).rewind_depth, REWIND_DEPTH);
        assert_eq!(Limits::for_state(4096).checkpoints, MAX_CHECKPOINTS);
        let big = Limits::for_state(64 << 20);
        assert_eq!((big.rewind_depth, big.checkpoints), (MIN_REWIND_DEPTH, 2));
    }

    #[test]
    fn copies_and_shifts_carry_the_snapshots() {
        let mut m = memory(2);
        pass(&mut m, 0, 100);
        m.copy_seq(0, 1);
        assert_eq!(m.truncate(1, 100, 64), 64);
        assert_eq!(m.seq_state(1), [64.0, 64.0]);
        assert_eq!(m.seq_state(0), [100.0, 100.0]);
        // Drop tokens 10..30: snapshots after them move down by 20, those inside are gone.
        m.shift(0, 10, 20);
        assert_eq!(m.truncate(0, 80, 70), 70);
        assert_eq!(m.seq_state(0), [90.0, 90.0]);
    }
}
