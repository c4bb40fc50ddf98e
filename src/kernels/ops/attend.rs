//! One query head's attention over f16 cache rows with an online softmax, as ggml's per-query
//! flash-attention kernel computes it (the backends' `f16_attend`): generic over the three
//! vector steps, so the AVX2 build inlines its kernels into the row loop.

use half::f16;

use super::f16_rows;

/// One kv head's rows of the cache: key row `p` is `keys[p * stride_k..]`, value row `p`
/// `values[p * stride_v..]`.
pub struct Cache<'a> {
    pub keys: &'a [f16],
    pub values: &'a [f16],
    pub stride_k: usize,
    pub stride_v: usize,
}

/// How a query·key dot product becomes an attention score: scaled, then soft-capped
/// (`cap * tanh(score / cap)`, Gemma 2) when `softcap` is positive; and the softmax's extra
/// logit with no value (gpt-oss's per-head attention sink; -inf: none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnScore {
    pub scale: f32,
    pub softcap: f32,
    pub sink: f32,
}

impl AttnScore {
    pub fn scaled(scale: f32) -> AttnScore {
        AttnScore {
            scale,
            softcap: 0.0,
            sink: f32::NEG_INFINITY,
        }
    }

    /// The same score soft-capped at `softcap` (0: not capped).
    pub fn with_softcap(self, softcap: f32) -> AttnScore {
        AttnScore { softcap, ..self }
    }

    /// The same score with sink logit `sink` (`None`: no sink).
    pub fn with_sink(self, sink: Option<f32>) -> AttnScore {
        AttnScore {
            sink: sink.unwrap_or(f32::NEG_INFINITY),
            ..self
        }
    }

    /// A softmax's running `(max, sum of e^(score - max))` with the sink's term added, as
    /// ggml's flash attention adds it after the rows: the factor that rescales what was
    /// accumulated (1 unless the sink is the new maximum) and the new sum. Without a sink:
    /// `(1, sum)`, bit for bit.
    #[inline]
    pub fn sink_term(self, max: f32, sum: f32) -> (f32, f32) {
        if self.sink == f32::NEG_INFINITY {
            (1.0, sum)
        } else if self.sink > max {
            let r = (max - self.sink).exp();
            (r, sum * r + 1.0)
        } else {
            (1.0, sum + (self.sink - max).exp())
        }
    }

    /// As ggml computes it: the scale divided by the cap first, then `cap * tanh`.
    #[inline(always)]
    pub fn of(self, dot: f32) -> f32 {
        if self.softcap > 0.0 {
            self.softcap * (dot * (self.scale / self.softcap)).tanh()
        } else {
            dot * self.scale
        }
    }
}

/// The three vector steps of [`online_attend`], per instruction set.
trait AttendOps {
    fn dot(q: &[f32], k: &[f16]) -> f32;
    fn scale(acc: &mut [f16], s: f32);
    fn mad(acc: &mut [f16], v: &[f16], w: f32);
}

struct ScalarOps;

impl AttendOps for ScalarOps {
    fn dot(q: &[f32], k: &[f16]) -> f32 {
        f16_rows::f16_dot(q, k)
    }
    fn scale(acc: &mut [f16], s: f32) {
        f16_rows::f16_scale(acc, s)
    }
    fn mad(acc: &mut [f16], v: &[f16], w: f32) {
        f16_rows::f16_mad(acc, v, w)
    }
}

/// The scalar twin (rows checked by the caller).
pub fn scalar(
    q16: &[f32],
    cache: &Cache,
    rows: std::ops::Range<usize>,
    score: AttnScore,
    out: &mut [f32],
) {
    online_attend::<ScalarOps>(q16, cache, rows, score, out)
}

/// Only used inside [`avx2`], which has the features.
#[cfg(target_arch = "x86_64")]
struct Avx2Ops;

#[cfg(target_arch = "x86_64")]
impl AttendOps for Avx2Ops {
    #[inline(always)]
    fn dot(q: &[f32], k: &[f16]) -> f32 {
        // SAFETY: reached only from `avx2` (AVX2, FMA and F16C detected).
        unsafe { f16_rows::avx2::f16_dot(q, k) }
    }
    #[inline(always)]
    fn scale(acc: &mut [f16], s: f32) {
        // SAFETY: as above.
        unsafe { f16_rows::avx2::f16_scale(acc, s) }
    }
    #[inline(always)]
    fn mad(acc: &mut [f16], v: &[f16], w: f32) {
        // SAFETY: as above.
        unsafe { f16_rows::avx2::f16_mad(acc, v, w) }
    }
}

/// [`online_attend`] compiled with AVX2 (rows checked by the caller), so the vector steps inline into the row loop.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn avx2(
    q16: &[f32],
    cache: &Cache,
    rows: std::ops::Range<usize>,
    score: AttnScore,
    out: &mut [f32],
) {
    online_attend::<Avx2Ops>(q16, cache, rows, score, out)
}

#[inline(always)]
fn online_attend<O: AttendOps>(
    q16: &[f32],
    cache: &Cache,
    rows: std::ops::Range<usize>,
    score: AttnScore,
    out: &mut [f32],
) {
    let (hk, hv) = (q16.len(), out.len());
    let mut acc = vec![f16::ZERO; hv];
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    for p in rows {
        let score = score.of(O::dot(q16, &cache.keys[p * cache.stride_k..][..hk]));
        // A new maximum rescales what was accumulated; otherwise this value is weighted down.
        let (rescale, weight) = if score > max {
            let r = (max - score).exp();
            max = score;
            (r, 1.0)
        } else {
            (1.0, (score - max).exp())
        };
        if rescale != 1.0 {
            O::scale(&mut acc, rescale);
        }
        O::mad(&mut acc, &cache.values[p * cache.stride_v..][..hv], weight);
        sum = sum * rescale + weight;
    }
    let (rescale, sum) = score.sink_term(max, sum);
    if rescale != 1.0 {
        O::scale(&mut acc, rescale);
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = a.to_f32() / sum;
    }
}
