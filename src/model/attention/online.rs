//! Flash attention's running state for a set of query rows: per row the largest score seen,
//! the sum of e^(score - max) and the value rows weighted by those terms, updated a block of
//! cache rows at a time, so no row of scores is ever longer than a block.

use super::Rows;
use crate::kernels::{self, AttnScore};

pub(super) struct Online {
    hv: usize,
    max: Vec<f32>,
    sum: Vec<f32>,
    /// [n_q * hv]: each query row's weighted values, relative to its current maximum.
    acc: Vec<f32>,
}

impl Online {
    pub fn new(n_q: usize, hv: usize) -> Online {
        Online {
            hv,
            max: vec![f32::NEG_INFINITY; n_q],
            sum: vec![0.0; n_q],
            acc: vec![0.0; n_q * hv],
        }
    }

    /// Turns query row `g`'s dot products with a block's rows into its softmax terms
    /// e^(score - max), in place; columns outside `seen` (masked rows) become 0. A larger
    /// maximum rescales what was accumulated before.
    pub fn weigh(&mut self, g: usize, dots: &mut [f32], seen: Rows, score: AttnScore) {
        dots[..seen.start].fill(0.0);
        dots[seen.end..].fill(0.0);
        let row = &mut dots[seen];
        if row.is_empty() {
            return;
        }
        row.iter_mut().for_each(|x| *x = score.of(*x));
        let block_max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if block_max > self.max[g] {
            // Nothing accumulated yet the first time: the factor is 0 and scales zeros.
            let r = (self.max[g] - block_max).exp();
            self.acc[g * self.hv..][..self.hv]
                .iter_mut()
                .for_each(|a| *a *= r);
            self.sum[g] *= r;
            self.max[g] = block_max;
        }
        self.sum[g] += kernels::backend().exp_shifted_sum(row, self.max[g]);
    }

    /// Adds the block's value rows (`n` rows of `hv` floats, f32) weighted by each query row's
    /// terms from [`Self::weigh`] (`weights[g * n + j]`).
    pub fn add_values(&mut self, values: &[f32], weights: &[f32], n: usize) {
        kernels::backend().f32_weighted_sum(&mut self.acc, self.hv, values, weights, n);
    }

    /// Query row `g`: its maximum score, its sum of terms and its weighted values.
    pub fn partial(&self, g: usize) -> (f32, f32, &[f32]) {
        (
            self.max[g],
            self.sum[g],
            &self.acc[g * self.hv..][..self.hv],
        )
    }
}

/// The same running state for query rows laid out as the columns of each block's scores
/// (`[n rows][n_q]`, as a tile computes them: keys times the transposed queries), so every
/// step runs along the queries in whole vectors. The accumulated values stay one row per query
/// (`[n_q][hv]`), ready for the next block's product.
pub(super) struct OnlineColumns {
    hv: usize,
    max: Vec<f32>,
    sum: Vec<f32>,
    pub acc: Vec<f32>,
    rescale: Vec<f32>,
    shift: Vec<f32>,
}

impl OnlineColumns {
    pub fn new(n_q: usize, hv: usize) -> OnlineColumns {
        OnlineColumns {
            hv,
            max: vec![f32::NEG_INFINITY; n_q],
            sum: vec![0.0; n_q],
            acc: vec![0.0; n_q * hv],
            rescale: vec![0.0; n_q],
            shift: vec![0.0; n_q],
        }
    }

    /// Turns a block's dot products (`dots[j * n_q + g]`: row `j`, query `g`) into softmax
    /// terms in place, after `mask(dots)` has set what a query must not see to -inf; rescales
    /// each query's accumulated values where its maximum grew.
    pub fn weigh(&mut self, dots: &mut [f32], score: AttnScore, mask: impl FnOnce(&mut [f32])) {
        let n_q = self.max.len();
        dots.iter_mut().for_each(|x| *x = score.of(*x));
        mask(dots);
        // The block's maximum per query, then the new running one.
        let new_max = &mut self.shift;
        new_max.copy_from_slice(&self.max);
        for row in dots.chunks_exact(n_q) {
            for (m, x) in new_max.iter_mut().zip(row) {
                *m = m.max(*x);
            }
        }
        for g in 0..n_q {
            let new = self.shift[g];
            // A query that has seen nothing yet keeps its (empty) state: no -inf - -inf.
            let seen = new > f32::NEG_INFINITY;
            self.rescale[g] = if seen { (self.max[g] - new).exp() } else { 1.0 };
            self.shift[g] = if seen { new } else { 0.0 };
            self.max[g] = new;
        }
        for row in dots.chunks_exact_mut(n_q) {
            for (x, s) in row.iter_mut().zip(&self.shift) {
                *x -= s;
            }
        }
        kernels::backend().exp_shifted_sum(dots, 0.0);
        for (s, r) in self.sum.iter_mut().zip(&self.rescale) {
            *s *= r;
        }
        for row in dots.chunks_exact(n_q) {
            for (s, x) in self.sum.iter_mut().zip(row) {
                *s += x;
            }
        }
        for (acc, &r) in self.acc.chunks_exact_mut(self.hv).zip(&self.rescale) {
            if r != 1.0 {
                acc.iter_mut().for_each(|a| *a *= r);
            }
        }
    }

    /// Query `g`'s attention output: its weighted values over their sum (and the sink's term
    /// of `score`).
    pub fn write_output(&self, g: usize, out: &mut [f32], score: AttnScore) {
        let (rescale, sum) = score.sink_term(self.max[g], self.sum[g]);
        let inv = rescale / sum;
        for (o, a) in out.iter_mut().zip(&self.acc[g * self.hv..][..self.hv]) {
            *o = a * inv;
        }
    }
}
