//! Paged weights: a model larger than its memory budget runs with its weights left in mapped
//! files (the model file, or the repack cache's file of repacked weights) and streamed per
//! layer, the OS doing the I/O. Before a layer runs, the next one's pages are asked for
//! (`MADV_WILLNEED`: read ahead into the page cache, in the background); after it ran, its
//! pages leave the process (`MADV_DONTNEED` on a read-only file mapping: they stay in the page
//! cache while memory allows, and no longer count in its RSS).
//!
//! Resident at once: about two layers, the output head while it runs, the embedding rows
//! looked up, the KV cache and scratch. Each token maps every weight page again, so token
//! speed is bound by page faults (from the page cache) or by the disk (beyond it).

use std::ops::Range;

use super::load::{advise_release, advise_will_need};
use super::weights::Weights;
use crate::gguf::GgufFile;

/// The address ranges of each layer's weights and of the output head, in the model's own
/// read-only file mappings (valid while the model lives: it owns them).
#[derive(Clone, Debug)]
pub struct Paging {
    layers: Vec<Vec<Range<usize>>>,
    output: Vec<Range<usize>>,
}

fn ranges(parts: Vec<&[u8]>) -> Vec<Range<usize>> {
    let addr = |b: &[u8]| b.as_ptr() as usize..b.as_ptr() as usize + b.len();
    parts.into_iter().map(addr).collect()
}

fn bytes(r: &[Range<usize>]) -> usize {
    r.iter().map(|r| r.len()).sum()
}

impl Paging {
    /// The ranges of `weights`, which must all be file-backed (read in place, or repacked
    /// copies mapped from the repack cache): releasing anonymous memory would lose it.
    pub(super) fn new(weights: &Weights, gguf: &GgufFile) -> Paging {
        let of = |lins: Vec<&super::Linear>| {
            ranges(lins.iter().flat_map(|l| l.resident_bytes(gguf)).collect())
        };
        let paging = Paging {
            layers: weights.layers.iter().map(|l| of(l.matrices())).collect(),
            output: of(vec![&weights.output]),
        };
        // Whatever loading touched leaves memory: the first pass reads what it needs.
        for il in 0..paging.layers.len() {
            paging.after_layer(il);
        }
        paging.after_output();
        paging
    }

    /// Bytes of the largest layer: what streaming keeps resident, twice (one running, one
    /// read ahead), beside the output head.
    pub fn largest_layer_bytes(&self) -> usize {
        self.layers.iter().map(|l| bytes(l)).max().unwrap_or(0)
    }

    pub fn output_bytes(&self) -> usize {
        bytes(&self.output)
    }

    /// Called before layer `il` runs: reads the next layer (after the last, the output head)
    /// ahead.
    pub(super) fn before_layer(&self, il: usize) {
        let next = self.layers.get(il + 1).unwrap_or(&self.output);
        next.iter().for_each(|r| advise_will_need(r.clone()));
    }

    /// Called after layer `il` ran: its pages leave the process.
    pub(super) fn after_layer(&self, il: usize) {
        self.layers[il]
            .iter()
            .for_each(|r| advise_release(r.clone()));
    }

    /// Called after the output head ran; reads the first layer ahead for the next pass.
    pub(super) fn after_output(&self) {
        self.output.iter().for_each(|r| advise_release(r.clone()));
        if let Some(first) = self.layers.first() {
            first.iter().for_each(|r| advise_will_need(r.clone()));
        }
    }
}
