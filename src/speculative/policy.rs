//! How many tokens to draft: the count that maximises expected tokens per second, from the
//! acceptance rate and pass times measured so far.
//!
//! With per-token acceptance `a`, a step drafting `k` tokens yields `1 + a + ... + a^k`
//! tokens in expectation, and costs one target pass over `k + 1` tokens plus `k` draft
//! steps. Pass time is modelled as `t1 + slope * (n - 1)`, a line fitted to the passes seen
//! (a server's passes never hold a single token, so `t1` cannot simply be measured); draft
//! time per token likewise. `k = 0` is a plain step; when it wins, a one-token draft is still
//! tried every [`PROBE_EVERY`] steps, so a text that becomes predictable again is noticed.

/// Weight of a new observation in the running averages.
const LEARN: f64 = 0.1;
/// Plain steps between probes while drafting does not pay.
const PROBE_EVERY: u32 = 8;
/// Passes over more tokens (prompts) are not fitted: past this the cost per token is the
/// compute-bound one, not what a few drafted tokens add.
const FIT_MAX_TOKENS: usize = 64;
/// Priors until measured, as fractions of a one-token pass: an extra token in a pass, and a
/// draft model's step.
const PRIOR_SLOPE: f64 = 0.05;
const PRIOR_DRAFT: f64 = 0.1;

/// Where a step's drafts come from: prompt lookup costs nothing, a draft model a pass per
/// token. Each is accepted at its own rate, so each has its own draft length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraftSource {
    Lookup,
    Model,
}

/// What has been learnt of one source.
#[derive(Clone, Debug)]
struct SourceState {
    /// Running estimate of the chance that a drafted token is accepted (given the ones
    /// before it were).
    acceptance: f64,
    plain_steps: u32,
}

#[derive(Clone, Debug)]
pub struct DraftPolicy {
    max: usize,
    passes: PassFit,
    /// The drafter's own source: a drafter with a model may try lookup first
    /// ([`DraftPolicy::draft_len_from`]).
    primary: DraftSource,
    lookup: SourceState,
    model: SourceState,
    /// Seconds per draft model pass, one per drafted token, once measured.
    draft_t: Option<f64>,
}

impl DraftPolicy {
    /// `free`: drafting costs nothing measurable (prompt lookup only).
    pub fn new(max: usize, free: bool) -> DraftPolicy {
        let fresh = SourceState {
            acceptance: 0.6,
            plain_steps: 0,
        };
        DraftPolicy {
            max,
            passes: PassFit::default(),
            primary: if free {
                DraftSource::Lookup
            } else {
                DraftSource::Model
            },
            lookup: fresh.clone(),
            model: fresh,
            draft_t: None,
        }
    }

    /// Tokens to draft in the next step.
    pub fn draft_len(&mut self) -> usize {
        self.draft_len_shared(1)
    }

    /// Tokens to draft in the next step of a pass that `sharers` sequences share (a server's
    /// slots): each extra token slows all of them, so its cost counts that many times.
    pub fn draft_len_shared(&mut self, sharers: usize) -> usize {
        self.draft_len_from(self.primary, sharers)
    }

    /// [`DraftPolicy::draft_len_shared`] for drafts from `source`.
    pub fn draft_len_from(&mut self, source: DraftSource, sharers: usize) -> usize {
        // Before any measurement every figure is a fraction of a pass (t1 = 1).
        let (t1, slope) = self.passes.line().unwrap_or((1.0, PRIOR_SLOPE));
        let draft = match (source, self.draft_t) {
            (DraftSource::Lookup, _) => 0.0,
            (DraftSource::Model, Some(t)) => t,
            (DraftSource::Model, None) => PRIOR_DRAFT * t1,
        };
        let max = self.max;
        let state = self.state(source);
        let sharers = sharers.max(1) as f64;
        // The pass the sharers take anyway (a token each); a drafted token slows every sharer,
        // and each sharer drafting as much is the steady state.
        let base = t1 + slope * (sharers - 1.0);
        let per_draft = slope * sharers + draft;
        let a = state.acceptance;
        let (mut best_k, mut best_rate) = (0, 1.0 / base);
        let mut expected = 1.0;
        let mut a_pow = 1.0;
        for k in 1..=max {
            a_pow *= a;
            expected += a_pow;
            let time = base + per_draft * k as f64;
            let rate = expected / time;
            if rate > best_rate {
                (best_k, best_rate) = (k, rate);
            }
        }
        if best_k == 0 && max > 0 {
            state.plain_steps += 1;
            if state.plain_steps >= PROBE_EVERY {
                state.plain_steps = 0;
                return 1;
            }
        }
        best_k
    }

    fn state(&mut self, source: DraftSource) -> &mut SourceState {
        match source {
            DraftSource::Lookup => &mut self.lookup,
            DraftSource::Model => &mut self.model,
        }
    }

    /// A draft model ran `n` forward passes in `secs`.
    pub fn drafted(&mut self, n: usize, secs: f64) {
        if n > 0 {
            let t = secs / n as f64;
            self.draft_t = Some(self.draft_t.map_or(t, |old| mix(old, t)));
        }
    }

    /// A target pass over `n` tokens took `secs`.
    pub fn verified(&mut self, n: usize, secs: f64) {
        if (1..=FIT_MAX_TOKENS).contains(&n) && secs > 0.0 {
            self.passes.observe(n as f64, secs);
        }
    }

    /// Of `drafted` tokens, the first `accepted` were accepted.
    pub fn accepted(&mut self, drafted: usize, accepted: usize) {
        self.accepted_from(self.primary, drafted, accepted)
    }

    /// [`DraftPolicy::accepted`] for drafts from `source`.
    pub fn accepted_from(&mut self, source: DraftSource, drafted: usize, accepted: usize) {
        let state = self.state(source);
        // Each accepted token, then the first rejected one, is one observation.
        for i in 0..drafted.min(accepted + 1) {
            let hit = if i < accepted { 1.0 } else { 0.0 };
            state.acceptance = mix(state.acceptance, hit);
        }
    }
}

fn mix(old: f64, new: f64) -> f64 {
    old + LEARN * (new - old)
}

/// Pass time against tokens in the pass: exponentially weighted sums for a least-squares line.
#[derive(Clone, Debug, Default)]
struct PassFit {
    w: f64,
    n: f64,
    t: f64,
    nn: f64,
    nt: f64,
}

impl PassFit {
    fn observe(&mut self, n: f64, t: f64) {
        // The first observation counts in full; later ones move the fit by LEARN.
        let keep = if self.w == 0.0 { 0.0 } else { 1.0 - LEARN };
        self.w = self.w * keep + 1.0;
        self.n = self.n * keep + n;
        self.t = self.t * keep + t;
        self.nn = self.nn * keep + n * n;
        self.nt = self.nt * keep + n * t;
    }

    /// `(t1, slope)`: seconds of a one-token pass and per extra token; with passes of one size
    /// only, the prior slope (as a fraction of t1) is assumed.
    fn line(&self) -> Option<(f64, f64)> {
        if self.w == 0.0 {
            return None;
        }
        let (mean_n, mean_t) = (self.n / self.w, self.t / self.w);
        let var = self.nn / self.w - mean_n * mean_n;
        let slope = if var > 0.01 {
            ((self.nt / self.w - mean_n * mean_t) / var).max(0.0)
        } else {
            mean_t * PRIOR_SLOPE / (1.0 + PRIOR_SLOPE * (mean_n - 1.0))
        };
        // A line through few points can put t1 near zero or below: a pass costs at least
        // what its token share of the mean costs.
        let t1 = (mean_t - slope * (mean_n - 1.0)).max(mean_t / mean_n);
        Some((t1, slope))
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

    /// A server's passes hold several tokens, never one: the fit still finds a one-token pass
    /// (not the mean pass), so a draft model as dear as a token's share of the pass is off.
    #[test]
    fn a_fit_without_one_token_passes_still_prices_drafts() {
        let mut p = DraftPolicy::new(16, false);
        // 4 slots: 36 ms + 5 ms per extra token; a draft step costs 20 ms.
        for n in [4, 6, 9, 4, 12, 5, 4, 8] {
            p.verified(n, 0.036 + 0.005 * (n - 1) as f64);
        }
        let (t1, slope) = p.passes.line().unwrap();
        assert!(
            (t1 - 0.036).abs() < 1e-6 && (slope - 0.005).abs() < 1e-6,
            "{t1} {slope}"
        );
        let mut free = p.clone();
        free.primary = DraftSource::Lookup;
        p.drafted(3, 0.060);
        for q in [&mut p, &mut free] {
            for _ in 0..30 {
                q.accepted(3, 2);
            }
        }
        // Acceptance 2/3: beside three other slots a 20 ms draft step does not pay; a free
        // draft does.
        assert_eq!(p.draft_len_shared(4), 0);
        assert!(free.draft_len_shared(4) > 0);
        // Prompt passes do not move the fit.
        p.verified(400, 3.0);
        assert_eq!(p.passes.line().unwrap(), (t1, slope));
    }

    /// Beside a draft model, lookup's drafts are as long as lookup's own acceptance pays for:
    /// what is learnt of each source stays its own.
    #[test]
    fn each_source_drafts_by_its_own_acceptance() {
        let mut p = DraftPolicy::new(16, false);
        p.verified(1, 0.030);
        p.drafted(4, 0.048);
        for _ in 0..30 {
            p.verified(5, 0.034);
            p.accepted_from(DraftSource::Model, 4, 0);
            p.accepted_from(DraftSource::Lookup, 8, 8);
        }
        let lookup = p.draft_len_from(DraftSource::Lookup, 1);
        assert!(lookup >= 12, "{lookup}");
        assert!(p.draft_len_from(DraftSource::Model, 1) <= 1);
        // The drafter's own source is the model: `accepted` and `draft_len` are its.
        assert_eq!(p.draft_len(), p.draft_len_from(DraftSource::Model, 1));
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
