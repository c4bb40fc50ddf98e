//! How many tokens to draft: the count that maximises expected tokens per second, from the
//! acceptance rate and pass times measured so far.
//!
//! With per-token acceptance `a`, a step drafting `k` tokens yields `1 + a + ... + a^k`
//! tokens in expectation, and costs one target pass over `k + 1` tokens plus `k` draft
//! steps. Pass time is modelled as `t1 + slope * (n - 1)` (measured), draft time per token
//! likewise. `k = 0` is a plain step; when it wins, a one-token draft is still tried every
//! [`PROBE_EVERY`] steps, so a text that becomes predictable again is noticed.

/// Weight of a new observation in the running averages.
const LEARN: f64 = 0.1;
/// Plain steps between probes while drafting does not pay.
const PROBE_EVERY: u32 = 8;

#[derive(Clone, Debug)]
pub struct DraftPolicy {
    max: usize,
    /// Running estimate of the chance that a drafted token is accepted (given the ones
    /// before it were).
    acceptance: f64,
    /// Seconds of a one-token target pass, and per extra token in the pass.
    pass_t1: Option<f64>,
    pass_slope: f64,
    /// Seconds per draft pass, one per drafted token (a fraction of a pass until measured).
    draft_t: f64,
    draft_measured: bool,
    plain_steps: u32,
}

impl DraftPolicy {
    /// `free`: drafting costs nothing measurable (prompt lookup).
    pub fn new(max: usize, free: bool) -> DraftPolicy {
        DraftPolicy {
            max,
            acceptance: 0.6,
            pass_t1: None,
            // Priors until measured: an extra token costs 5% of a pass; a draft token 10%
            // (a draft model) or nothing (lookup). Only ratios matter.
            pass_slope: 0.05,
            draft_t: if free { 0.0 } else { 0.1 },
            draft_measured: false,
            plain_steps: 0,
        }
    }

    /// Tokens to draft in the next step.
    pub fn draft_len(&mut self) -> usize {
        self.draft_len_shared(1)
    }

    /// Tokens to draft in the next step of a pass that `sharers` sequences share (a server's
    /// slots): each extra token slows all of them, so its cost counts that many times.
    pub fn draft_len_shared(&mut self, sharers: usize) -> usize {
        let t1 = self.pass_t1.unwrap_or(1.0);
        // Before any measurement every figure is a fraction of a pass (t1 = 1).
        let (slope, draft) = (self.pass_slope * sharers.max(1) as f64, self.draft_t);
        let a = self.acceptance;
        let (mut best_k, mut best_rate) = (0, 1.0 / t1);
        let mut expected = 1.0;
        let mut a_pow = 1.0;
        for k in 1..=self.max {
            a_pow *= a;
            expected += a_pow;
            let time = t1 + slope.max(0.0) * k as f64 + draft * k as f64;
            let rate = expected / time;
            if rate > best_rate {
                (best_k, best_rate) = (k, rate);
            }
        }
        if best_k == 0 && self.max > 0 {
            self.plain_steps += 1;
            if self.plain_steps >= PROBE_EVERY {
                self.plain_steps = 0;
                return 1;
            }
        }
        best_k
    }

    /// A drafter ran `n` forward passes in `secs`.
    pub fn drafted(&mut self, n: usize, secs: f64) {
        if n > 0 && self.draft_t > 0.0 {
            self.draft_t = mix(self.draft_t, secs / n as f64, self.draft_measured);
            self.draft_measured = true;
        }
    }

    /// A target pass over `n` tokens took `secs`.
    pub fn verified(&mut self, n: usize, secs: f64) {
        match (n, self.pass_t1) {
            (1, None) => {
                // The priors were fractions of a pass; scale them to the first measured one.
                self.pass_slope *= secs;
                self.pass_t1 = Some(secs);
                self.scale_draft_prior(secs);
            }
            (1, Some(t1)) => self.pass_t1 = Some(mix(t1, secs, true)),
            (n, Some(t1)) => {
                let slope = (secs - t1) / (n - 1) as f64;
                self.pass_slope = mix(self.pass_slope, slope, true);
            }
            // A verify pass before any plain one: its time stands in for a plain pass.
            (n, None) => {
                let t1 = secs / (1.0 + self.pass_slope * (n - 1) as f64);
                self.pass_slope *= t1;
                self.pass_t1 = Some(t1);
                self.scale_draft_prior(t1);
            }
        }
    }

    fn scale_draft_prior(&mut self, t1: f64) {
        if !self.draft_measured {
            self.draft_t *= t1;
        }
    }

    /// Of `drafted` tokens, the first `accepted` were accepted.
    pub fn accepted(&mut self, drafted: usize, accepted: usize) {
        // Each accepted token, then the first rejected one, is one observation.
        for i in 0..drafted.min(accepted + 1) {
            let hit = if i < accepted { 1.0 } else { 0.0 };
            self.acceptance = mix(self.acceptance, hit, true);
        }
    }
}

fn mix(old: f64, new: f64, learn: bool) -> f64 {
    if learn {
        old + LEARN * (new - old)
    } else {
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_long_when_accepted_and_cheap() {
        let mut p = DraftPolicy::new(16, true);
        p.verified(1, 0.010);
        p.verified(8, 0.012);
        for _ in 0..50 {
            p.accepted(8, 8);
        }
        assert!(p.draft_len() >= 12, "{}", p.draft_len());
    }

    #[test]
    fn stops_drafting_when_rejected_but_probes() {
        let mut p = DraftPolicy::new(8, false);
        p.verified(1, 0.010);
        p.drafted(4, 0.012);
        p.verified(5, 0.014);
        for _ in 0..60 {
            p.accepted(4, 0);
        }
        let lens: Vec<usize> = (0..PROBE_EVERY).map(|_| p.draft_len()).collect();
        assert_eq!(
            lens.iter().filter(|&&k| k == 0).count(),
            PROBE_EVERY as usize - 1
        );
        assert_eq!(lens.last(), Some(&1));
    }

    #[test]
    fn a_shared_pass_drafts_less() {
        let mut p = DraftPolicy::new(16, true);
        p.verified(1, 0.010);
        for _ in 0..30 {
            p.verified(5, 0.014);
            p.accepted(4, 2);
        }
        let alone = p.draft_len_shared(1);
        assert!(alone > 0);
        assert!(p.draft_len_shared(8) < alone);
    }

    #[test]
    fn expensive_passes_shorten_drafts() {
        let mut cheap = DraftPolicy::new(16, true);
        let mut dear = DraftPolicy::new(16, true);
        for p in [&mut cheap, &mut dear] {
            p.verified(1, 0.010);
            for _ in 0..30 {
                p.accepted(4, 3);
            }
        }
        for _ in 0..30 {
            cheap.verified(5, 0.011);
            dear.verified(5, 0.030);
        }
        assert!(dear.draft_len() < cheap.draft_len());
    }
}
