//! Element-wise operations of the forward pass (f32, row-major).

use super::arch::RopeStyle;
use super::hparams::Yarn;

/// 1 / rms(x), the sum of squares kept in f64 (as ggml does) so long rows lose no precision.
pub fn inv_rms(x: &[f32], eps: f32) -> f32 {
    let mean_sq = x.iter().map(|&v| (v * v) as f64).sum::<f64>() / x.len() as f64;
    1.0 / (mean_sq as f32 + eps).sqrt()
}

/// `out = x * inv_rms * w`: the RMS norm of a row, or of part of one, given the whole row's
/// [`inv_rms`].
pub fn rms_norm_part(x: &[f32], w: &[f32], inv_rms: f32, out: &mut [f32]) {
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = v * inv_rms * g;
    }
}

/// RMS-normalises each row of `rows` (row length `w.len()`) in place.
pub fn rms_norm_rows_inplace(rows: &mut [f32], w: &[f32], eps: f32) {
    for row in rows.chunks_exact_mut(w.len()) {
        let scale = inv_rms(row, eps);
        for (v, &g) in row.iter_mut().zip(w) {
            *v *= scale * g;
        }
    }
}

/// Adds `bias` to every row of `rows`.
pub fn add_bias(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        for (v, &b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

pub fn add_inplace(acc: &mut [f32], x: &[f32]) {
    for (a, &b) in acc.iter_mut().zip(x) {
        *a += b;
    }
}

/// `x *= sigmoid(gate)`, element by element.
pub fn mul_sigmoid_inplace(x: &mut [f32], gate: &[f32]) {
    for (v, &g) in x.iter_mut().zip(gate) {
        *v *= 1.0 / (1.0 + (-g).exp());
    }
}

/// `ln(1 + e^x)`, and `x` itself above 20 (as ggml computes it).
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}

/// `gate = silu(gate) * up`
pub fn swiglu_inplace(gate: &mut [f32], up: &[f32]) {
    crate::kernels::backend().swiglu(gate, up)
}

/// `gate = gelu_tanh(gate) * up`, GELU through ggml's f16 table.
pub fn geglu_inplace(gate: &mut [f32], up: &[f32]) {
    crate::kernels::backend().geglu(gate, up)
}

/// gpt-oss's clamped SwiGLU, as ggml's `swiglu_oai` computes it: `g = min(gate, limit)`,
/// `u = clamp(up, -limit, limit)`, `gate = g / (1 + e^(-alpha g)) * (u + 1)`.
pub fn swiglu_oai_inplace(gate: &mut [f32], up: &[f32], alpha: f32, limit: f32) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = g.min(limit);
        let y = u.clamp(-limit, limit);
        *g = x / (1.0 + (alpha * -x).exp()) * (y + 1.0);
    }
}

/// `x = H x / sqrt(n)` on each consecutive `n` values of `x` (`n` a power of two): the
/// orthonormal Walsh-Hadamard rotation (Sylvester order), which is its own inverse. Rotating
/// queries and keys alike keeps their dot products and spreads a few outlier channels over the
/// whole block before a quantized cache stores it.
pub fn hadamard_inplace(x: &mut [f32], n: usize) {
    debug_assert!(n.is_power_of_two() && x.len().is_multiple_of(n));
    let scale = 1.0 / (n as f32).sqrt();
    for block in x.chunks_exact_mut(n) {
        let mut h = 1;
        while h < n {
            for pair in block.chunks_exact_mut(2 * h) {
                let (lo, hi) = pair.split_at_mut(h);
                for (a, b) in lo.iter_mut().zip(hi) {
                    (*a, *b) = (*a + *b, *a - *b);
                }
            }
            h *= 2;
        }
        block.iter_mut().for_each(|v| *v *= scale);
    }
}

/// What a [`Rope`] is built from.
pub struct RopeParams<'a> {
    pub base: f32,
    /// Multiplies positions (1 / the linear scaling factor).
    pub freq_scale: f32,
    /// Dimensions of each head that are rotated.
    pub n_rot: usize,
    pub style: RopeStyle,
    /// Per-pair frequency divisors (Llama 3.1's rope_freqs, LongRoPE's factors).
    pub factors: Option<&'a [f32]>,
    /// Multiplies the rotated dimensions (LongRoPE's attention factor; ggml's `mscale`).
    pub attn_factor: f32,
    /// YaRN's blend of `freq_scale`d and original frequencies per pair.
    pub yarn: Option<Yarn>,
}

/// Rotary position embedding tables for one base frequency: `inv_freq[i]` for each rotated pair.
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f32>,
    style: RopeStyle,
    /// Dimensions of each head that are rotated.
    n_rot: usize,
    attn_factor: f32,
}

impl Rope {
    pub fn new(p: &RopeParams) -> Rope {
        let corr = p.yarn.map(|y| (y, y.corr_dims(p.n_rot, p.base)));
        let inv_freq = (0..p.n_rot / 2)
            .map(|i| {
                let theta = p.base.powf(-2.0 * i as f32 / p.n_rot as f32);
                let ff = p.factors.map_or(1.0, |ff| ff[i]);
                match corr {
                    Some((y, dims)) => {
                        let (extrap, mix) = (theta / ff, y.extrapolation(dims, i));
                        p.freq_scale * extrap * (1.0 - mix) + extrap * mix
                    }
                    None => p.freq_scale * theta / ff,
                }
            })
            .collect();
        Rope {
            inv_freq,
            style: p.style,
            n_rot: p.n_rot,
            attn_factor: p.attn_factor,
        }
    }

    /// Plain RoPE: no scaling or factors.
    #[cfg(test)]
    fn plain(base: f32, n_rot: usize, style: RopeStyle) -> Rope {
        Rope::new(&RopeParams {
            base,
            freq_scale: 1.0,
            n_rot,
            style,
            factors: None,
            attn_factor: 1.0,
            yarn: None,
        })
    }

    /// Rotates every head (length `head_dim`) of each row in `rows` (a token's queries and its
    /// keys) for position `pos`; the angles are computed once for all of them.
    pub fn apply(&self, rows: &mut [&mut [f32]], head_dim: usize, pos: usize) {
        self.rotation(pos as f32, self.attn_factor)
            .apply(rows, head_dim);
    }

    /// The rotation that moves keys already rotated for position `p` to position `p + delta`
    /// (a context shift): angles add, and the attention factor is already in them.
    pub fn shift(&self, delta: f32) -> Rotation<'_> {
        self.rotation(delta, 1.0)
    }

    /// The part of `v` (heads of `head_dim`) that this RoPE leaves almost where it is at every
    /// position below `n_positions`, as position 0 stores it: the dimensions it does not
    /// rotate, and the pairs that turn less than a quarter radian over the whole range (their
    /// `attn_factor` applied); 0 elsewhere.
    pub fn still_part(&self, v: &[f32], head_dim: usize, n_positions: usize) -> Vec<f32> {
        let mut out = v.to_vec();
        self.rotation(0.0, self.attn_factor)
            .apply(&mut [&mut out], head_dim);
        let turning = self.turning_pairs(n_positions);
        for head in out.chunks_exact_mut(head_dim) {
            for &(a, b) in &turning {
                (head[a], head[b]) = (0.0, 0.0);
            }
        }
        out
    }

    /// The pairs of dimensions (indices within a head) that turn more than a quarter radian at
    /// some position below `n_positions`: over a context, each of their two dimensions holds
    /// half of the pair's energy.
    pub fn turning_pairs(&self, n_positions: usize) -> Vec<(usize, usize)> {
        let half = self.n_rot / 2;
        (self.inv_freq.iter().enumerate())
            .filter(|(_, f)| *f * n_positions as f32 > 0.25)
            .map(|(i, _)| match self.style {
                RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                RopeStyle::NeoX => (i, i + half),
            })
            .collect()
    }

    fn rotation(&self, pos: f32, scale: f32) -> Rotation<'_> {
        let sin_cos = self
            .inv_freq
            .iter()
            .map(|f| {
                let (sin, cos) = (pos * f).sin_cos();
                (sin * scale, cos * scale)
            })
            .collect();
        Rotation {
            rope: self,
            sin_cos,
        }
    }
}

/// One position's RoPE angles, ready to rotate any number of heads.
pub struct Rotation<'a> {
    rope: &'a Rope,
    sin_cos: Vec<(f32, f32)>,
}

impl Rotation<'_> {
    /// Rotates every head (length `head_dim`) of each row in `rows`.
    pub fn apply(&self, rows: &mut [&mut [f32]], head_dim: usize) {
        let half = self.rope.n_rot / 2;
        for head in rows.iter_mut().flat_map(|r| r.chunks_exact_mut(head_dim)) {
            for (i, &(sin, cos)) in self.sin_cos.iter().enumerate() {
                let (a, b) = match self.rope.style {
                    RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                    RopeStyle::NeoX => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * cos - x1 * sin;
                head[b] = x0 * sin + x1 * cos;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_unit_weights_gives_unit_rms() {
        let x = [1.0, -2.0, 3.0, -4.0];
        let mut out = [0.0; 4];
        rms_norm_part(&x, &[1.0; 4], inv_rms(&x, 0.0), &mut out);
        let rms = (out.iter().map(|v| v * v).sum::<f32>() / 4.0).sqrt();
        assert!((rms - 1.0).abs() < 1e-6);
        assert!(out[0] > 0.0 && out[1] < 0.0);
    }

    /// The still part keeps the unrotated dimensions and the pairs that turn under a quarter
    /// radian over the range, and rotated to any position there it barely moves.
    #[test]
    fn still_part_is_what_rope_hardly_turns() {
        for style in [RopeStyle::Interleaved, RopeStyle::NeoX] {
            // 12 of 16 dimensions rotated: six pairs, frequencies 10^(-5i/6); only the slowest
            // turns under a quarter radian in 1000 positions.
            let rope = Rope::plain(1e5, 12, style);
            let v: Vec<f32> = (0..32).map(|i| 1.0 + i as f32).collect();
            let n_positions = 1000;
            let c = rope.still_part(&v, 16, n_positions);
            for head in 0..2 {
                for d in 12..16 {
                    assert_eq!(c[head * 16 + d], v[head * 16 + d], "unrotated dims kept");
                }
            }
            let kept: Vec<usize> = (0..16).filter(|&d| c[d] != 0.0).collect();
            assert!(kept.len() > 4 && kept.len() < 16, "{style:?}: {kept:?}");
            // Rotated to the last position, the kept part moves by under a quarter of itself.
            let mut moved = c.clone();
            rope.apply(&mut [&mut moved], 16, n_positions - 1);
            let diff: f32 = moved.iter().zip(&c).map(|(a, b)| (a - b).powi(2)).sum();
            let norm: f32 = c.iter().map(|x| x * x).sum();
            assert!(diff.sqrt() < 0.25 * norm.sqrt(), "{style:?}");
        }
    }

    #[test]
    fn rope_preserves_norm_and_is_identity_at_zero() {
        for style in [RopeStyle::Interleaved, RopeStyle::NeoX] {
            let rope = Rope::plain(10_000.0, 8, style);
            let orig: Vec<f32> = (0..16).map(|i| i as f32 * 0.3 - 2.0).collect();
            let mut x = orig.clone();
            rope.apply(&mut [&mut x], 8, 0);
            assert_eq!(x, orig);
            rope.apply(&mut [&mut x], 8, 37);
            let n0: f32 = orig.iter().map(|v| v * v).sum();
            let n1: f32 = x.iter().map(|v| v * v).sum();
            assert!((n0 - n1).abs() < 1e-3, "{n0} vs {n1}");
            assert_ne!(x, orig);
        }
    }

    /// gpt-oss's YaRN (factor 32 over 4096 positions, base 150000, 64 dimensions): pairs
    /// 0..=8 keep their frequency, pairs from 18 on are interpolated, the ramp between blends
    /// linearly.
    #[test]
    fn yarn_keeps_fast_pairs_and_interpolates_slow_ones() {
        let yarn = Yarn {
            beta_fast: 32.0,
            beta_slow: 1.0,
            n_ctx_orig: 4096,
        };
        let (base, n_rot) = (150_000.0f32, 64);
        assert_eq!(yarn.corr_dims(n_rot, base), (8.0, 18.0));
        let rope = Rope::new(&RopeParams {
            base,
            freq_scale: 1.0 / 32.0,
            n_rot,
            style: RopeStyle::NeoX,
            factors: None,
            attn_factor: 1.0,
            yarn: Some(yarn),
        });
        let theta = |i: usize| base.powf(-2.0 * i as f32 / n_rot as f32);
        for i in 0..n_rot / 2 {
            let mix = (1.0 - (i as f32 - 8.0) / 10.0).clamp(0.0, 1.0);
            let want = theta(i) * (mix + (1.0 - mix) / 32.0);
            assert!((rope.inv_freq[i] - want).abs() <= 1e-6 * want, "pair {i}");
        }
    }

    #[test]
    fn a_shift_moves_rotated_keys_to_the_new_position() {
        for style in [RopeStyle::Interleaved, RopeStyle::NeoX] {
            let rope = Rope::new(&RopeParams {
                base: 10_000.0,
                freq_scale: 0.5,
                n_rot: 6,
                style,
                factors: None,
                attn_factor: 1.25,
                yarn: None,
            });
            let orig: Vec<f32> = (0..16).map(|i| i as f32 * 0.3 - 2.0).collect();
            let (mut moved, mut direct) = (orig.clone(), orig.clone());
            rope.apply(&mut [&mut moved], 8, 700);
            rope.shift(-300.0).apply(&mut [&mut moved], 8);
            rope.apply(&mut [&mut direct], 8, 400);
            for (a, b) in moved.iter().zip(&direct) {
                assert!((a - b).abs() < 1e-4, "{style:?}: {moved:?} vs {direct:?}");
            }
        }
    }

    #[test]
    fn rope_pairs_match_style() {
        // Position 1, first pair rotates by exactly 1 radian (inv_freq[0] = 1).
        let rope = Rope::plain(10_000.0, 4, RopeStyle::NeoX);
        let mut x = vec![1.0, 0.0, 0.0, 0.0];
        rope.apply(&mut [&mut x], 4, 1);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[2] - 1f32.sin()).abs() < 1e-6);
        let rope = Rope::plain(10_000.0, 4, RopeStyle::Interleaved);
        let mut x = vec![1.0, 0.0, 0.0, 0.0];
        rope.apply(&mut [&mut x], 4, 1);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[1] - 1f32.sin()).abs() < 1e-6);
    }

    #[test]
    fn hadamard_is_an_involution_and_keeps_dot_products() {
        let x: Vec<f32> = (0..128)
            .map(|i| ((i * 37 % 17) as f32 - 8.0) / 3.0)
            .collect();
        let y: Vec<f32> = (0..128)
            .map(|i| ((i * 11 % 13) as f32 - 6.0) / 5.0)
            .collect();
        let (mut hx, mut hy) = (x.clone(), y.clone());
        hadamard_inplace(&mut hx, 64);
        hadamard_inplace(&mut hy, 64);
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f32>();
        assert!((dot(&x, &y) - dot(&hx, &hy)).abs() < 1e-3);
        assert_ne!(hx, x);
        // The first output of each block is the block's sum / sqrt(64).
        assert!((hx[0] - x[..64].iter().sum::<f32>() / 8.0).abs() < 1e-5);
        hadamard_inplace(&mut hx, 64);
        for (a, b) in hx.iter().zip(&x) {
            assert!((a - b).abs() < 1e-5);
        }
    }

    #[test]
    fn activations() {
        let mut g = [0.0, 1.0, -1.0];
        swiglu_inplace(&mut g, &[2.0, 2.0, 2.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 2.0 * 0.731_058_6).abs() < 1e-5);
        let mut g = [0.0, 3.0];
        geglu_inplace(&mut g, &[1.0, 1.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 2.996_362_6).abs() < 2e-3, "f16-table GELU"); // table rounds to f16
    }
}
