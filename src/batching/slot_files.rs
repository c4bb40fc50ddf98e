//! A slot's tokens and KV cache saved to a file and restored (llama-server's
//! `POST /slots/{id}?action=save|restore|erase`), so a long shared prompt survives a restart.
//! The scheduler thread runs these between steps, on idle slots only.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::model::{Context, ModelError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotAction {
    /// Writes the slot's state to this file (replacing it whole, never partly).
    Save(PathBuf),
    /// Replaces the slot's contents with the state in this file.
    Restore(PathBuf),
    /// Forgets the slot's tokens.
    Erase,
}

/// What a slot action did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotReport {
    /// Tokens saved, restored or erased.
    pub n_tokens: usize,
    /// Bytes written or read.
    pub n_bytes: u64,
    pub elapsed: Duration,
}

#[derive(Debug)]
pub enum SlotError {
    NoSuchSlot {
        slot: usize,
        n_slots: usize,
    },
    /// The slot is serving a request; try again when it is done.
    Busy {
        slot: usize,
    },
    /// The file could not be written or read, or holds a state this slot cannot take (another
    /// model, another KV cache type, corrupted, truncated); the slot is unchanged.
    State(ModelError),
    /// The scheduler thread has ended.
    Stopped,
}

impl std::fmt::Display for SlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotError::NoSuchSlot { slot, n_slots } => {
                write!(f, "slot {slot} does not exist (this server has {n_slots})")
            }
            SlotError::Busy { slot } => {
                write!(
                    f,
                    "slot {slot} is serving a request; try again when it is idle"
                )
            }
            SlotError::State(e) => write!(f, "{e}"),
            SlotError::Stopped => write!(f, "the scheduler has stopped"),
        }
    }
}

impl std::error::Error for SlotError {}

pub(super) type Reply = mpsc::Sender<Result<SlotReport, SlotError>>;

/// A slot action on its way to the scheduler thread.
pub(super) struct SlotTask {
    pub slot: usize,
    pub action: SlotAction,
    pub reply: Reply,
}

/// Runs `task` on the context unless its slot is `busy`, and answers it.
pub(super) fn perform(ctx: &mut Context, busy: bool, task: SlotTask) {
    let SlotTask {
        slot,
        action,
        reply,
    } = task;
    let started = Instant::now();
    let result = if busy {
        Err(SlotError::Busy { slot })
    } else {
        match action {
            SlotAction::Save(path) => ctx
                .save_seq_file(slot, &[], &path)
                .map(|n_bytes| (ctx.seq_len(slot), n_bytes)),
            SlotAction::Restore(path) => ctx.load_seq_file(slot, &path).map(|_| {
                (
                    ctx.seq_len(slot),
                    std::fs::metadata(&path).map_or(0, |m| m.len()),
                )
            }),
            SlotAction::Erase => {
                let n = ctx.seq_len(slot);
                ctx.truncate_seq(slot, 0);
                Ok((n, 0))
            }
        }
        .map(|(n_tokens, n_bytes)| SlotReport {
            n_tokens,
            n_bytes,
            elapsed: started.elapsed(),
        })
        .map_err(SlotError::State)
    };
    // The asker may have gone (a closed connection); nothing to do then.
    let _ = reply.send(result);
}
