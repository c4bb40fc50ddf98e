//! The candidate list and the truncation / softmax steps of the sampler chain.
//!
//! Invariant after [`fill_candidates`]: every logit is finite or `-inf` (NaN becomes `-inf`,
//! `+inf` is clamped to `f32::MAX`), so comparisons are total and softmax never sees `inf - inf`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::TokenId;

/// One vocabulary entry during sampling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: TokenId,
    /// Logit after penalties, before temperature.
    pub logit: f32,
    /// Final probability (after truncation and temperature); 0 until computed.
    pub p: f32,
}

#[inline]
pub(crate) fn sanitize(l: f32) -> f32 {
    if l.is_nan() {
        f32::NEG_INFINITY
    } else {
        l.min(f32::MAX)
    }
}

pub(crate) fn fill_candidates(cands: &mut Vec<Candidate>, logits: &[f32]) {
    cands.clear();
    cands.extend(logits.iter().enumerate().map(|(i, &l)| Candidate {
        id: i as TokenId,
        logit: sanitize(l),
        p: 0.0,
    }));
}

/// Descending logit, ties broken by lower id, so every selection is deterministic.
#[inline]
fn cmp_desc(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// Index of the largest logit; NaN counts as `-inf`, ties go to the lowest id, empty → 0.
pub fn argmax(logits: &[f32]) -> TokenId {
    let mut best = 0usize;
    let mut best_l = f32::NEG_INFINITY;
    for (i, &l) in logits.iter().enumerate() {
        // Strict `>` keeps the first of equal maxima; NaN compares false and is skipped.
        if l > best_l {
            best = i;
            best_l = l;
        }
    }
    best as TokenId
}

pub(crate) fn argmax_candidates(cands: &[Candidate]) -> Option<Candidate> {
    cands.iter().copied().min_by(cmp_desc)
}

/// Log-probabilities of `softmax(logits)`, computed stably (max-shifted, f64 accumulation).
/// NaN counts as `-inf`; if nothing is finite the result is uniform (`-ln n`) rather than NaN.
pub fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits
        .iter()
        .map(|&l| sanitize(l))
        .fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return vec![-(logits.len() as f32).ln(); logits.len()];
    }
    let sum: f64 = logits
        .iter()
        .map(|&l| ((sanitize(l) - max) as f64).exp())
        .sum();
    let log_sum = sum.ln() as f32;
    logits
        .iter()
        .map(|&l| (sanitize(l) - max) - log_sum)
        .collect()
}

/// Heap entry ordered so the *worst* kept candidate is the heap maximum.
struct Worst(Candidate);

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_desc(&self.0, &other.0)
    }
}

/// Keeps the `k` best candidates (unordered), never sorting the whole vocabulary.
pub(crate) fn top_k(cands: &mut Vec<Candidate>, k: usize) {
    if k == 0 || k >= cands.len() {
        return;
    }
    if heap_pays(k, cands.len()) {
        let mut best = KBest::new(k);
        cands.iter().for_each(|&c| best.offer(c));
        cands.clear();
        cands.extend(best.into_candidates());
    } else {
        cands.select_nth_unstable_by(k - 1, cmp_desc);
        cands.truncate(k);
    }
}

/// Small k: a bounded heap costs about one comparison per token, since few tokens beat the
/// current k-th best; this is several times faster than quickselect.
fn heap_pays(k: usize, n: usize) -> bool {
    k.saturating_mul(16) < n
}

/// The `k` best candidates offered so far (k > 0), by [`cmp_desc`].
struct KBest {
    heap: BinaryHeap<Worst>,
    k: usize,
    /// The k-th best so far, once there are k: nothing with a lower logit can get in.
    worst: Option<Candidate>,
}

impl KBest {
    fn new(k: usize) -> KBest {
        KBest {
            heap: BinaryHeap::with_capacity(k + 1),
            k,
            worst: None,
        }
    }

    /// The lowest logit that can still get in (IEEE `>=`, so -0.0 and +0.0 both pass:
    /// a superset of what [`cmp_desc`] admits); `None` while fewer than k are kept.
    fn threshold(&self) -> Option<f32> {
        self.worst.map(|w| w.logit)
    }

    fn offer(&mut self, c: Candidate) {
        match self.worst {
            None => {
                self.heap.push(Worst(c));
                if self.heap.len() == self.k {
                    self.worst = self.heap.peek().map(|w| w.0);
                }
            }
            Some(w) => {
                if c.logit >= w.logit && cmp_desc(&c, &w) == Ordering::Less {
                    if let Some(mut top) = self.heap.peek_mut() {
                        *top = Worst(c);
                    }
                    self.worst = self.heap.peek().map(|w| w.0);
                }
            }
        }
    }

    /// The kept candidates, in heap order.
    fn into_candidates(self) -> impl Iterator<Item = Candidate> {
        self.heap.into_iter().map(|w| w.0)
    }
}

/// [`fill_candidates`], dropping impossible (-inf) tokens, then [`top_k`], in one pass over
/// `logits` without writing out the whole vocabulary: the same candidates in the same order.
/// Falls back to those steps where `top_k` would not take its heap path.
pub(crate) fn top_k_of_logits(cands: &mut Vec<Candidate>, logits: &[f32], k: usize) {
    cands.clear();
    let possible = |&l: &f32| sanitize(l) > f32::NEG_INFINITY;
    let n_possible = logits
        .iter()
        .filter(|l| possible(l))
        .take(k.saturating_mul(16) + 1)
        .count();
    if k == 0 || !heap_pays(k, n_possible) {
        fill_candidates(cands, logits);
        cands.retain(|c| c.logit > f32::NEG_INFINITY);
        return top_k(cands, k);
    }
    // Chunks whose logits all fall below the current k-th best are skipped with one
    // vectorised comparison per element (NaN compares false, as its -inf would).
    const CHUNK: usize = 16;
    let mut best = KBest::new(k);
    for (c, chunk) in logits.chunks(CHUNK).enumerate() {
        if let Some(t) = best.threshold() {
            if !chunk.iter().fold(false, |any, &l| any | (l >= t)) {
                continue;
            }
        }
        for (j, &l) in chunk.iter().enumerate() {
            if possible(&l) {
                best.offer(Candidate {
                    id: (c * CHUNK + j) as TokenId,
                    logit: sanitize(l),
                    p: 0.0,
                });
            }
        }
    }
    cands.extend(best.into_candidates());
}

/// Nucleus (`top_p`) then `min_p` truncation, on the softmax of the current candidates.
/// Both keep a prefix of the sorted list and `min_p` only depends on the maximum, which
/// `top_p` never removes, so the result is the shorter of the two prefixes. Leaves `cands`
/// sorted (descending) and non-empty if it was non-empty.
pub(crate) fn top_p_min_p(cands: &mut Vec<Candidate>, top_p: f32, min_p: f32) {
    let use_p = top_p < 1.0;
    let use_min = min_p > 0.0;
    if cands.len() <= 1 || !(use_p || use_min) {
        return;
    }
    let max = cands
        .iter()
        .map(|c| c.logit)
        .fold(f32::NEG_INFINITY, f32::max);
    // f32 exp (cheaper than f64 on 262k entries) with an f64 running sum.
    let z: f64 = cands.iter().map(|c| (c.logit - max).exp() as f64).sum();

    // Pre-filter before sorting so large vocabularies never pay for a full sort:
    // - min_p: p_i >= min_p * p_max  <=>  logit_i >= max + ln(min_p).
    // - top_p: tokens with p_i < eps = (1 - top_p) / (2n) hold < (1 - top_p) / 2 mass in
    //   total, so the nucleus (which needs mass top_p) ends before reaching any of them.
    // Both thresholds are <= max, so the best candidate always survives.
    let mut thresh = f32::NEG_INFINITY;
    if use_min {
        thresh = thresh.max(max + min_p.ln());
    }
    if use_p {
        let eps = (1.0 - top_p as f64) / (2.0 * cands.len() as f64);
        thresh = thresh.max(max + (eps * z).ln() as f32);
    }
    cands.retain(|c| c.logit >= thresh);
    cands.sort_unstable_by(cmp_desc);

    if use_p {
        let mut cum = 0.0f64;
        for i in 0..cands.len() {
            cum += (cands[i].logit - max).exp() as f64 / z;
            if cum >= top_p as f64 {
                cands.truncate(i + 1);
                break;
            }
        }
    }
}

/// Fills `p` with `softmax(logit / temperature)`. Shifting by the max before dividing keeps
/// huge logits and tiny temperatures from overflowing.
pub(crate) fn softmax_with_temperature(cands: &mut [Candidate], temperature: f32) {
    let max = cands
        .iter()
        .map(|c| c.logit)
        .fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for c in cands.iter_mut() {
        // Divide rather than multiply by 1/t: 1/t overflows for subnormal t, and 0 * inf = NaN.
        c.p = ((c.logit - max) / temperature).exp();
        sum += c.p as f64;
    }
    // sum >= 1 because the maximum contributes exp(0).
    let inv = 1.0 / sum;
    for c in cands.iter_mut() {
        c.p = (c.p as f64 * inv) as f32;
    }
}

/// Inverse-CDF draw with `u` uniform in [0, 1). Zero-probability entries are never chosen.
pub(crate) fn draw(cands: &[Candidate], u: f64) -> TokenId {
    let total: f64 = cands.iter().map(|c| c.p as f64).sum();
    let r = u * total;
    let mut acc = 0.0f64;
    let mut last = None;
    for c in cands {
        if c.p > 0.0 {
            acc += c.p as f64;
            last = Some(c.id);
            if r < acc {
                return c.id;
            }
        }
    }
    // Only reachable through rounding (r == total); fall back to the last live candidate.
    last.or_else(|| cands.first().map(|c| c.id)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(logits: &[f32]) -> Vec<Candidate> {
        let mut c = Vec::new();
        fill_candidates(&mut c, logits);
        c
    }

    fn ids(c: &[Candidate]) -> Vec<TokenId> {
        let mut v: Vec<_> = c.iter().map(|c| c.id).collect();
        v.sort_unstable();
        v
    }

    /// Logits whose softmax is exactly `probs` (up to rounding).
    fn from_probs(probs: &[f32]) -> Vec<f32> {
        probs.iter().map(|p| p.ln()).collect()
    }

    #[test]
    fn argmax_ties_nan_empty() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, f32::NAN]), 1);
        assert_eq!(argmax(&[f32::NAN, f32::NAN]), 0);
        assert_eq!(argmax(&[]), 0);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::INFINITY]), 1);
    }

    #[test]
    fn log_softmax_matches_definition() {
        let l = [1.0f32, 2.0, 3.0, f32::NAN];
        let out = log_softmax(&l);
        let z: f32 = l[..3].iter().map(|x| x.exp()).sum();
        for i in 0..3 {
            assert!((out[i] - (l[i] - z.ln())).abs() < 1e-6);
        }
        assert_eq!(out[3], f32::NEG_INFINITY);
        let total: f32 = out.iter().map(|x| x.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        // Stable for huge logits.
        let big = log_softmax(&[1e30, 1e30]);
        assert!((big[0] - (-2f32.ln())).abs() < 1e-6);
        // Degenerate: uniform.
        let u = log_softmax(&[f32::NEG_INFINITY; 4]);
        assert!(u.iter().all(|&x| (x + 4f32.ln()).abs() < 1e-6));
    }

    #[test]
    fn top_k_keeps_best_with_low_id_ties() {
        let mut c = cands(&[0.0, 5.0, 3.0, 5.0, 4.0, 3.0]);
        top_k(&mut c, 3);
        assert_eq!(ids(&c), [1, 3, 4]);
        let mut c = cands(&[1.0, 2.0, 2.0, 2.0]);
        top_k(&mut c, 2);
        assert_eq!(ids(&c), [1, 2]);
        let mut c = cands(&[1.0, 2.0]);
        top_k(&mut c, 10);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn top_k_heap_and_quickselect_agree() {
        // Pseudo-random logits with many ties (coarse values).
        let mut s = 7u64;
        let l: Vec<f32> = (0..10_000)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((s >> 56) % 50) as f32
            })
            .collect();
        for k in [1, 5, 40, 600, 625, 5000] {
            let mut c = cands(&l);
            top_k(&mut c, k); // heap for k < n/16, quickselect otherwise
            let mut want = cands(&l);
            want.sort_by(cmp_desc);
            want.truncate(k);
            assert_eq!(ids(&c), ids(&want), "k = {k}");
        }
    }

    #[test]
    fn top_k_of_logits_matches_step_by_step() {
        // Coarse values (ties), NaN and -inf sprinkled in; sizes on both sides of the
        // heap threshold, and vocabularies with fewer finite logits than 16k.
        let mut s = 11u64;
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            s >> 40
        };
        for (n, k, impossible) in [
            (10_000, 40, 7),
            (10_000, 40, 2),
            (10_000, 1, 3),
            (10_000, 600, 5),
            (700, 40, 2),
            (100, 40, 9),
            (30, 40, 3),
            (5, 0, 2),
        ] {
            let l: Vec<f32> = (0..n)
                .map(|_| match next() % impossible {
                    0 => f32::NEG_INFINITY,
                    1 if impossible > 2 => f32::NAN,
                    _ => (next() % 50) as f32 - 25.0,
                })
                .collect();
            let mut want = cands(&l);
            want.retain(|c| c.logit > f32::NEG_INFINITY);
            top_k(&mut want, k);
            let mut got = vec![Candidate {
                id: 1,
                logit: 0.0,
                p: 0.0,
            }];
            top_k_of_logits(&mut got, &l, k);
            let key = |c: &[Candidate]| -> Vec<(TokenId, u32)> {
                c.iter().map(|c| (c.id, c.logit.to_bits())).collect()
            };
            assert_eq!(key(&got), key(&want), "n = {n}, k = {k}");
        }
    }

    #[test]
    fn top_p_keeps_smallest_sufficient_prefix() {
        let l = from_probs(&[0.1, 0.4, 0.3, 0.15, 0.05]);
        // Sorted: 1 (0.4), 2 (0.3), 3 (0.15), 0 (0.1), 4 (0.05).
        for (p, want) in [
            (0.35, vec![1]),
            (0.5, vec![1, 2]),
            (0.8, vec![1, 2, 3]),
            (0.9, vec![0, 1, 2, 3]),
            (0.99, vec![0, 1, 2, 3, 4]),
            (0.0, vec![1]),
            (1e-9, vec![1]),
        ] {
            let mut c = cands(&l);
            top_p_min_p(&mut c, p, 0.0);
            assert_eq!(ids(&c), want, "top_p = {p}");
        }
    }

    #[test]
    fn min_p_keeps_relative_to_max() {
        let l = from_probs(&[0.1, 0.4, 0.3, 0.15, 0.05]);
        for (m, want) in [
            (0.5, vec![1, 2]),       // >= 0.2
            (0.3, vec![1, 2, 3]),    // >= 0.12
            (0.2, vec![0, 1, 2, 3]), // >= 0.08
            (1.0, vec![1]),
        ] {
            let mut c = cands(&l);
            top_p_min_p(&mut c, 1.0, m);
            assert_eq!(ids(&c), want, "min_p = {m}");
        }
        // min_p = 1 keeps every tied maximum.
        let mut c = cands(&[2.0, 1.0, 2.0]);
        top_p_min_p(&mut c, 1.0, 1.0);
        assert_eq!(ids(&c), [0, 2]);
    }

    #[test]
    fn top_p_then_min_p_is_shorter_prefix() {
        let l = from_probs(&[0.1, 0.4, 0.3, 0.15, 0.05]);
        let mut c = cands(&l);
        top_p_min_p(&mut c, 0.9, 0.3); // top_p -> 4 tokens, min_p -> 3
        assert_eq!(ids(&c), [1, 2, 3]);
        let mut c = cands(&l);
        top_p_min_p(&mut c, 0.5, 0.2); // top_p -> 2 tokens, min_p -> 4
        assert_eq!(ids(&c), [1, 2]);
    }

    #[test]
    fn top_p_prefilter_is_exact_on_long_tail() {
        // One strong token plus a long flat tail: the nucleus must reach into the tail.
        let n = 50_000;
        let mut l = vec![0.0f32; n];
        l[7] = 10.0;
        let mut c = cands(&l);
        let max_p = 10f64.exp() / (10f64.exp() + (n - 1) as f64);
        let p = 0.5f32;
        top_p_min_p(&mut c, p, 0.0);
        let tail_p = 1.0 / (10f64.exp() + (n - 1) as f64);
        let want = 1 + ((p as f64 - max_p) / tail_p).ceil() as usize;
        assert!(c.len().abs_diff(want) <= 1, "{} vs {}", c.len(), want);
        assert_eq!(c[0].id, 7);
        // Ties among the tail resolve to the lowest ids.
        assert!(c[1..].windows(2).all(|w| w[0].id < w[1].id));
    }

    #[test]
    fn temperature_scaling() {
        let l = [1.0f32, 2.0, 0.5];
        for t in [0.25f32, 0.7, 1.0, 2.0, 10.0] {
            let mut c = cands(&l);
            softmax_with_temperature(&mut c, t);
            let z: f64 = l.iter().map(|&x| (x as f64 / t as f64).exp()).sum();
            for (ci, &x) in c.iter().zip(&l) {
                let want = (x as f64 / t as f64).exp() / z;
                assert!((ci.p as f64 - want).abs() < 1e-6, "t={t}");
            }
        }
        // Tiny temperature and huge logits: no overflow, mass goes to the max.
        // 1e-40 is subnormal: 1/t would be inf.
        for t in [1e-30, 1e-40] {
            let mut c = cands(&[f32::MAX, 0.0, f32::INFINITY]);
            softmax_with_temperature(&mut c, t);
            assert_eq!(c.iter().map(|c| c.p).collect::<Vec<_>>(), [0.5, 0.0, 0.5]);
        }
    }

    #[test]
    fn draw_inverse_cdf() {
        let mut c = cands(&[0.0, 0.0, 0.0, 0.0]);
        for (ci, p) in c.iter_mut().zip([0.1, 0.0, 0.6, 0.3]) {
            ci.p = p;
        }
        assert_eq!(draw(&c, 0.0), 0);
        assert_eq!(draw(&c, 0.0999), 0);
        assert_eq!(draw(&c, 0.1001), 2);
        assert_eq!(draw(&c, 0.69), 2);
        assert_eq!(draw(&c, 0.71), 3);
        assert_eq!(draw(&c, 1.0), 3); // rounding fallback: last live token
        assert_eq!(draw(&[], 0.5), 0);
    }
}
