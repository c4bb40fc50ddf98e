//! The built-in samplers, each the algorithm llama.cpp's sampler of that name runs, over a
//! candidate list ([`Candidates`]).

use super::candidates::Candidates;
use super::Stage;
use crate::types::{llama_logit_bias, llama_token, LLAMA_DEFAULT_SEED};
use kolibri::sampling::Xoshiro256StarStar;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;

/// A seeded random source; LLAMA_DEFAULT_SEED draws a fresh seed.
#[derive(Clone)]
pub struct Rng {
    pub seed: u32,
    rng: Xoshiro256StarStar,
}

impl Rng {
    pub fn new(seed: u32) -> Rng {
        let seed = if seed == LLAMA_DEFAULT_SEED {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(
                std::time::UNIX_EPOCH
                    .elapsed()
                    .map_or(0, |d| d.as_nanos() as u64),
            );
            h.finish() as u32
        } else {
            seed
        };
        Rng {
            seed,
            rng: Xoshiro256StarStar::seed_from_u64(seed as u64),
        }
    }

    fn uniform(&mut self) -> f64 {
        self.rng.next_f64()
    }

    /// An index drawn by the candidates' probabilities (`p`, computed first).
    fn draw(&mut self, cur: &mut Candidates) -> Option<usize> {
        let r = self.uniform();
        let mut acc = 0.0f64;
        let data = cur.data();
        for (i, c) in data.iter().enumerate() {
            acc += c.p as f64;
            if r < acc {
                return Some(i);
            }
        }
        data.iter().rposition(|c| c.p > 0.0)
    }
}

macro_rules! name {
    ($s:literal) => {
        fn name(&self) -> &'static CStr {
            $s
        }
    };
}

#[derive(Clone)]
pub struct Greedy;

impl Stage for Greedy {
    name!(c"greedy");
    fn apply(&mut self, cur: &mut Candidates) {
        if let Some(i) = cur.argmax() {
            cur.select(i);
        }
    }
}

#[derive(Clone)]
pub struct Dist {
    pub rng: Rng,
    pub seed: u32,
}

impl Stage for Dist {
    name!(c"dist");
    fn apply(&mut self, cur: &mut Candidates) {
        cur.softmax(false);
        if let Some(i) = self.rng.draw(cur) {
            cur.select(i);
        }
    }
    fn reset(&mut self) {
        self.rng = Rng::new(self.seed);
    }
    fn seed(&self) -> Option<u32> {
        Some(self.rng.seed)
    }
}

#[derive(Clone)]
pub struct TopK(pub i32);

pub fn top_k(cur: &mut Candidates, k: i32) {
    if k <= 0 {
        return;
    }
    cur.sort();
    cur.truncate(k as usize);
}

impl Stage for TopK {
    name!(c"top-k");
    fn apply(&mut self, cur: &mut Candidates) {
        top_k(cur, self.0);
    }
}

#[derive(Clone)]
pub struct TopP {
    pub p: f32,
    pub min_keep: usize,
}

impl Stage for TopP {
    name!(c"top-p");
    fn apply(&mut self, cur: &mut Candidates) {
        if self.p >= 1.0 || cur.len() == 0 {
            return;
        }
        cur.softmax(true);
        let mut cum = 0.0f32;
        let mut keep = cur.len();
        for (i, c) in cur.data().iter().enumerate() {
            cum += c.p;
            if cum >= self.p && i + 1 >= self.min_keep {
                keep = i + 1;
                break;
            }
        }
        cur.truncate(keep);
    }
}

#[derive(Clone)]
pub struct MinP {
    pub p: f32,
    pub min_keep: usize,
}

impl Stage for MinP {
    name!(c"min-p");
    fn apply(&mut self, cur: &mut Candidates) {
        if self.p <= 0.0 || cur.len() == 0 {
            return;
        }
        let threshold = cur.max_logit() + self.p.ln();
        cur.sort();
        let above = cur
            .data()
            .iter()
            .take_while(|c| c.logit >= threshold)
            .count();
        cur.truncate(above.max(self.min_keep));
    }
}

#[derive(Clone)]
pub struct Typical {
    pub p: f32,
    pub min_keep: usize,
}

impl Stage for Typical {
    name!(c"typical");
    fn apply(&mut self, cur: &mut Candidates) {
        if self.p >= 1.0 || cur.len() == 0 {
            return;
        }
        cur.softmax(true);
        let data = cur.data();
        let entropy: f32 = data
            .iter()
            .filter(|c| c.p > 0.0)
            .map(|c| -c.p * c.p.ln())
            .sum();
        let shift = |p: f32| (-p.ln() - entropy).abs();
        let mut order: Vec<usize> = (0..data.len()).collect();
        order.sort_by(|&a, &b| shift(data[a].p).total_cmp(&shift(data[b].p)));
        let mut cum = 0.0f32;
        let mut keep = order.len();
        for (i, &k) in order.iter().enumerate() {
            cum += data[k].p;
            if cum > self.p && i + 1 >= self.min_keep {
                keep = i + 1;
                break;
            }
        }
        let kept: Vec<_> = order[..keep].iter().map(|&k| data[k]).collect();
        data[..keep].copy_from_slice(&kept);
        cur.truncate(keep);
        cur.mark_unsorted();
    }
}

/// Temperature `t`; at `t <= 0` only the best candidate stays possible.
pub fn temperature(cur: &mut Candidates, t: f32) {
    if t <= 0.0 {
        let best = cur.argmax();
        for (i, c) in cur.data().iter_mut().enumerate() {
            if Some(i) != best {
                c.logit = f32::NEG_INFINITY;
            }
        }
        return;
    }
    for c in cur.data() {
        c.logit /= t;
    }
}

#[derive(Clone)]
pub struct Temp {
    pub t: f32,
    pub delta: f32,
    pub exponent: f32,
}

impl Stage for Temp {
    name!(c"temp");
    fn apply(&mut self, cur: &mut Candidates) {
        if self.delta <= 0.0 || cur.len() <= 1 {
            return temperature(cur, self.t);
        }
        // Entropy-scaled temperature between t - delta and t + delta.
        let (lo, hi) = ((self.t - self.delta).max(0.0), self.t + self.delta);
        cur.softmax(true);
        let n = cur.len() as f32;
        let entropy: f32 = cur
            .data()
            .iter()
            .filter(|c| c.p > 0.0)
            .map(|c| -c.p * c.p.ln())
            .sum();
        let normalized = entropy / n.ln();
        let t = lo + (hi - lo) * normalized.powf(self.exponent);
        temperature(cur, t);
        cur.softmax(false);
    }
}

#[derive(Clone)]
pub struct Xtc {
    pub p: f32,
    pub t: f32,
    pub min_keep: usize,
    pub rng: Rng,
    pub seed: u32,
}

impl Stage for Xtc {
    name!(c"xtc");
    fn apply(&mut self, cur: &mut Candidates) {
        if self.p <= 0.0 || self.t > 0.5 || cur.len() < 2 {
            return;
        }
        if self.rng.uniform() as f32 > self.p {
            return;
        }
        cur.softmax(true);
        let above = cur.data().iter().take_while(|c| c.p >= self.t).count();
        // Removes every candidate above the threshold but the last of them.
        if above >= 2 && cur.len() - (above - 1) >= self.min_keep {
            cur.skip(above - 1);
        }
    }
    fn reset(&mut self) {
        self.rng = Rng::new(self.seed);
    }
    fn seed(&self) -> Option<u32> {
        Some(self.rng.seed)
    }
}

#[derive(Clone)]
pub struct TopNSigma(pub f32);

impl Stage for TopNSigma {
    name!(c"top-n-sigma");
    fn apply(&mut self, cur: &mut Candidates) {
        if self.0 <= 0.0 || cur.len() == 0 {
            return;
        }
        let finite: Vec<f32> = cur
            .data()
            .iter()
            .map(|c| c.logit)
            .filter(|l| l.is_finite())
            .collect();
        if finite.is_empty() {
            return;
        }
        let max = finite.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mean = finite.iter().sum::<f32>() / finite.len() as f32;
        let var = finite.iter().map(|l| (l - mean).powi(2)).sum::<f32>() / finite.len() as f32;
        let floor = max - self.0 * var.sqrt();
        for c in cur.data() {
            if c.logit < floor {
                c.logit = f32::NEG_INFINITY;
            }
        }
        cur.softmax(false);
    }
}

/// Mirostat 1.0 and 2.0: truncation that steers the observed surprise toward `tau`.
#[derive(Clone)]
pub struct Mirostat {
    pub version: u8,
    pub n_vocab: i32,
    pub tau: f32,
    pub eta: f32,
    pub m: i32,
    pub mu: f32,
    pub rng: Rng,
    pub seed: u32,
}

impl Stage for Mirostat {
    fn name(&self) -> &'static CStr {
        if self.version == 1 {
            c"mirostat"
        } else {
            c"mirostat-v2"
        }
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if cur.len() == 0 {
            return;
        }
        cur.softmax(true);
        if self.version == 1 {
            let data = cur.data();
            let m = (self.m.max(1) as usize).min(data.len() - 1);
            let (mut num, mut den) = (0.0f32, 0.0f32);
            for i in 0..m {
                let t = ((i + 2) as f32 / (i + 1) as f32).ln();
                let b = (data[i].p / data[i + 1].p).ln();
                num += t * b;
                den += t * t;
            }
            let s_hat = if den > 0.0 { num / den } else { 1.0 };
            let eps = s_hat - 1.0;
            let n = self.n_vocab.max(1) as f32;
            let k = ((eps * 2f32.powf(self.mu)) / (1.0 - n.powf(-eps))).powf(1.0 / s_hat);
            top_k(cur, (k.round() as i32).max(1));
        } else {
            let keep = cur
                .data()
                .iter()
                .take_while(|c| -c.p.log2() <= self.mu)
                .count();
            cur.truncate(keep.max(1));
        }
        cur.softmax(false);
        if let Some(i) = self.rng.draw(cur) {
            cur.select(i);
            let surprise = -cur.data()[i].p.log2();
            self.mu -= self.eta * (surprise - self.tau);
        }
    }
    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.rng = Rng::new(self.seed);
    }
    fn seed(&self) -> Option<u32> {
        Some(self.rng.seed)
    }
}

/// Repetition, frequency and presence penalties over the last `last_n` accepted tokens.
#[derive(Clone)]
pub struct Penalties {
    pub last_n: usize,
    pub repeat: f32,
    pub frequency: f32,
    pub presence: f32,
    pub window: VecDeque<llama_token>,
    pub counts: HashMap<llama_token, u32>,
}

impl Stage for Penalties {
    name!(c"penalties");
    fn accept(&mut self, token: llama_token) {
        if self.last_n == 0 {
            return;
        }
        if self.window.len() == self.last_n {
            if let Some(old) = self.window.pop_front() {
                if let Some(n) = self.counts.get_mut(&old) {
                    *n -= 1;
                    if *n == 0 {
                        self.counts.remove(&old);
                    }
                }
            }
        }
        self.window.push_back(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }
    fn apply(&mut self, cur: &mut Candidates) {
        let idle = self.repeat == 1.0 && self.frequency == 0.0 && self.presence == 0.0;
        if idle || self.last_n == 0 || self.counts.is_empty() {
            return;
        }
        for c in cur.data() {
            let Some(&n) = self.counts.get(&c.id) else {
                continue;
            };
            // CTRL's rule: shrink positive logits, grow negative ones.
            if c.logit <= 0.0 {
                c.logit *= self.repeat;
            } else {
                c.logit /= self.repeat;
            }
            c.logit -= n as f32 * self.frequency + self.presence;
        }
        cur.mark_unsorted();
    }
    fn reset(&mut self) {
        self.window.clear();
        self.counts.clear();
    }
}

#[derive(Clone)]
pub struct LogitBias(pub Vec<llama_logit_bias>);

impl Stage for LogitBias {
    name!(c"logit-bias");
    fn apply(&mut self, cur: &mut Candidates) {
        let data = cur.data();
        for b in &self.0 {
            // The usual list is the whole vocabulary in id order: look there first.
            let direct = usize::try_from(b.token)
                .ok()
                .filter(|&i| data.get(i).is_some_and(|c| c.id == b.token));
            let index = direct.or_else(|| data.iter().position(|c| c.id == b.token));
            if let Some(i) = index {
                data[i].logit += b.bias;
            }
        }
        cur.mark_unsorted();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{llama_token_data, llama_token_data_array};

    /// Runs `stage` over `logits` (ids 0..n) and returns the surviving (id, logit) pairs and
    /// the selected index.
    fn run(stage: &mut dyn Stage, logits: &[f32]) -> (Vec<(i32, f32)>, i64) {
        let mut data: Vec<llama_token_data> = logits
            .iter()
            .enumerate()
            .map(|(i, &logit)| llama_token_data {
                id: i as i32,
                logit,
                p: 0.0,
            })
            .collect();
        let mut arr = llama_token_data_array {
            data: data.as_mut_ptr(),
            size: data.len(),
            selected: -1,
            sorted: false,
        };
        // SAFETY: `arr` covers `data`, alive for the call.
        let mut cur = unsafe { Candidates::new(&mut arr) };
        stage.apply(&mut cur);
        let kept = cur.data().iter().map(|c| (c.id, c.logit)).collect();
        (kept, arr.selected)
    }

    fn ids(kept: &[(i32, f32)]) -> Vec<i32> {
        kept.iter().map(|&(id, _)| id).collect()
    }

    const LOGITS: [f32; 5] = [1.0, 3.0, 2.0, 0.5, 2.5];

    #[test]
    fn top_k_keeps_the_k_best_in_order() {
        assert_eq!(ids(&run(&mut TopK(3), &LOGITS).0), [1, 4, 2]);
        assert_eq!(run(&mut TopK(0), &LOGITS).0.len(), 5, "k <= 0 is off");
        assert_eq!(run(&mut TopK(99), &LOGITS).0.len(), 5);
    }

    #[test]
    fn top_p_keeps_the_smallest_set_reaching_p() {
        // Probabilities of [3.0, 2.5, 2.0, ...]: 0.425, 0.258, 0.156, 0.057, 0.035 (approx).
        assert_eq!(
            ids(&run(
                &mut TopP {
                    p: 0.5,
                    min_keep: 1
                },
                &LOGITS
            )
            .0),
            [1, 4]
        );
        assert_eq!(
            ids(&run(
                &mut TopP {
                    p: 0.1,
                    min_keep: 1
                },
                &LOGITS
            )
            .0),
            [1]
        );
        assert_eq!(
            run(
                &mut TopP {
                    p: 0.1,
                    min_keep: 3
                },
                &LOGITS
            )
            .0
            .len(),
            3
        );
        assert_eq!(
            run(
                &mut TopP {
                    p: 1.0,
                    min_keep: 1
                },
                &LOGITS
            )
            .0
            .len(),
            5
        );
    }

    #[test]
    fn min_p_drops_tokens_below_a_fraction_of_the_best() {
        // p = e^-1: logits more than 1 below the best (3.0) go.
        let (kept, _) = run(
            &mut MinP {
                p: (-1.0f32).exp(),
                min_keep: 1,
            },
            &LOGITS,
        );
        assert_eq!(ids(&kept), [1, 4, 2]);
        let (kept, _) = run(
            &mut MinP {
                p: 0.99,
                min_keep: 2,
            },
            &LOGITS,
        );
        assert_eq!(ids(&kept), [1, 4], "min_keep holds");
    }

    #[test]
    fn temperature_scales_and_zero_keeps_only_the_best() {
        let (kept, _) = run(
            &mut Temp {
                t: 0.5,
                delta: 0.0,
                exponent: 1.0,
            },
            &LOGITS,
        );
        assert_eq!(kept[1], (1, 6.0));
        let (kept, _) = run(
            &mut Temp {
                t: 0.0,
                delta: 0.0,
                exponent: 1.0,
            },
            &LOGITS,
        );
        let finite: Vec<i32> = kept
            .iter()
            .filter(|c| c.1.is_finite())
            .map(|c| c.0)
            .collect();
        assert_eq!(finite, [1]);
    }

    #[test]
    fn penalties_follow_the_ctrl_rule_and_openai_counts() {
        let mut p = Penalties {
            last_n: 3,
            repeat: 2.0,
            frequency: 0.5,
            presence: 0.25,
            window: VecDeque::new(),
            counts: HashMap::new(),
        };
        for t in [1, 1, 3, 0] {
            p.accept(t);
        }
        // The window holds the last 3: [1, 3, 0]; token 1 once, 3 once, 0 once.
        let (kept, _) = run(&mut p, &[2.0, 3.0, -1.0, -1.0, 1.0]);
        assert_eq!(kept[0].1, 2.0 / 2.0 - 0.5 - 0.25);
        assert_eq!(kept[1].1, 3.0 / 2.0 - 0.5 - 0.25);
        assert_eq!(kept[2].1, -1.0, "not in the window");
        assert_eq!(kept[3].1, -2.0 - 0.5 - 0.25, "a negative logit grows");
        assert_eq!(kept[4].1, 1.0);
        p.reset();
        assert_eq!(run(&mut p, &[2.0]).0[0].1, 2.0);
    }

    #[test]
    fn greedy_selects_the_argmax_and_dist_draws_reproducibly() {
        assert_eq!(run(&mut Greedy, &LOGITS).1, 1);
        let draws = |seed| {
            let mut d = Dist {
                rng: Rng::new(seed),
                seed,
            };
            (0..32).map(|_| run(&mut d, &LOGITS).1).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        // A certain token is always drawn.
        let mut d = Dist {
            rng: Rng::new(1),
            seed: 1,
        };
        let certain = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY];
        assert!((0..50).all(|_| run(&mut d, &certain).1 == 1));
    }

    #[test]
    fn logit_bias_finds_tokens_in_any_order() {
        let mut b = LogitBias(vec![
            llama_logit_bias {
                token: 3,
                bias: 10.0,
            },
            llama_logit_bias {
                token: 0,
                bias: f32::NEG_INFINITY,
            },
        ]);
        let (kept, _) = run(&mut b, &LOGITS);
        assert_eq!(kept[3].1, 10.5);
        assert_eq!(kept[0].1, f32::NEG_INFINITY);
    }
}
