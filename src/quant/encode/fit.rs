//! Scale searches: for a group of weights, the scale (and minimum) whose rounded quants
//! reproduce the group best, by the error measure each K-quant type uses.

use super::nearest_int;

/// Groups whose largest magnitude is below this quantize to zero.
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// Error measure of [`fit_scale_min`].
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Error {
    Squared,
    Absolute,
}

/// The search grid of [`fit_scale_min`]: scales `(nmax + rmin + rdelta * i) / (max - min)`
/// for `i` in `0..=steps`.
pub(super) struct Grid {
    pub rmin: f32,
    pub rdelta: f32,
    pub steps: usize,
}

/// `x ≈ scale * q - min` with `q` in `0..=nmax`, minimising the `w`-weighted error: starts
/// from the range [min(x, 0), max(x)], then tries each grid scale, refitting scale and min by
/// weighted least squares on that scale's rounding. Returns `(scale, min)` (`min ≥ 0`, the
/// amount subtracted) and leaves the quants in `q`.
pub(super) fn fit_scale_min(
    x: &[f32],
    w: &[f32],
    nmax: i32,
    grid: &Grid,
    error: Error,
    q: &mut [u8],
) -> (f32, f32) {
    let (mut lo, hi) = x
        .iter()
        .fold((x[0], x[0]), |(a, b), &v| (a.min(v), b.max(v)));
    let (sum_w, sum_x) = x
        .iter()
        .zip(w)
        .fold((0.0f32, 0.0f32), |(sw, sx), (&v, &wi)| {
            (sw + wi, sx + wi * v)
        });
    lo = lo.min(0.0);
    if hi == lo {
        q.fill(0);
        return (0.0, -lo);
    }
    let round_all = |iscale: f32, lo: f32, out: &mut [u8]| {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = nearest_int(iscale * (v - lo)).clamp(0, nmax) as u8;
        }
    };
    let cost = |scale: f32, lo: f32, l: &[u8]| -> f32 {
        x.iter().zip(w).zip(l).fold(0.0f32, |e, ((&v, &wi), &li)| {
            let diff = scale * li as f32 + lo - v;
            e + wi
                * if error == Error::Absolute {
                    diff.abs()
                } else {
                    diff * diff
                }
        })
    };
    let mut iscale = nmax as f32 / (hi - lo);
    let mut scale = 1.0 / iscale;
    round_all(iscale, lo, q);
    let mut best = cost(scale, lo, q);
    let mut trial = [0u8; 32];
    let trial = &mut trial[..x.len()];
    for i in 0..=grid.steps {
        iscale = (grid.rmin + grid.rdelta * i as f32 + nmax as f32) / (hi - lo);
        round_all(iscale, lo, trial);
        let (mut sl, mut sl2, mut sxl) = (0.0f32, 0.0f32, 0.0f32);
        for ((&li, &v), &wi) in trial.iter().zip(x).zip(w) {
            let l = li as f32;
            sl += wi * l;
            sl2 += wi * l * l;
            sxl += wi * l * v;
        }
        let det = sum_w * sl2 - sl * sl;
        if det <= 0.0 {
            continue;
        }
        let mut this_scale = (sum_w * sxl - sum_x * sl) / det;
        let mut this_min = (sl2 * sum_x - sl * sxl) / det;
        if this_min > 0.0 {
            this_min = 0.0;
            this_scale = sxl / sl2;
        }
        let e = cost(this_scale, this_min, trial);
        if e < best {
            q.copy_from_slice(trial);
            best = e;
            scale = this_scale;
            lo = this_min;
        }
    }
    (scale, -lo)
}

/// `x ≈ scale * (q - nmax)` with `q - nmax` in `-nmax..nmax`, minimising the x²-weighted
/// squared error over 19 scales around `-nmax / max` (max the signed largest magnitude).
/// Returns the scale; quants (offset by `nmax`) in `q`.
pub(super) fn fit_symmetric(x: &[f32], nmax: i32, q: &mut [u8]) -> f32 {
    let max = super::legacy::signed_max(x);
    if max.abs() < GROUP_MAX_EPS {
        q.fill(0);
        return 0.0;
    }
    let round = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        x.iter().fold((0.0f32, 0.0f32), |(slx, sl2), &v| {
            let (l, w) = (round(iscale, v) as f32, v * v);
            (slx + w * v * l, sl2 + w * l * l)
        })
    };
    let store = |iscale: f32, q: &mut [u8]| {
        for (o, &v) in q.iter_mut().zip(x) {
            *o = (round(iscale, v) + nmax) as u8;
        }
    };
    let iscale = -(nmax as f32) / max;
    store(iscale, q);
    let (slx, sl2) = sums(iscale);
    let mut scale = if sl2 != 0.0 { slx / sl2 } else { 0.0 };
    let mut best = scale * slx;
    for is in (-9..=9).filter(|&i| i != 0) {
        let iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (slx, sl2) = sums(iscale);
        if sl2 > 0.0 && slx * slx > best * sl2 {
            store(iscale, q);
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    scale
}

/// Q3_K's fit: quants `-nmax..nmax` at `-nmax / max`, then up to 5 passes that move single
/// quants while that lowers the x²-weighted squared error of the least-squares scale.
/// Returns the scale; quants (offset by `nmax`) in `q`.
pub(super) fn fit_q3(x: &[f32], nmax: i32, q: &mut [u8]) -> f32 {
    let max = super::legacy::signed_max(x);
    if max.abs() < GROUP_MAX_EPS {
        q.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut l = [0i32; 16];
    let l = &mut l[..x.len()];
    let (mut slx, mut sl2) = (0.0f32, 0.0f32);
    for (li, &v) in l.iter_mut().zip(x) {
        *li = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        let w = v * v;
        slx += w * v * *li as f32;
        sl2 += w * *li as f32 * *li as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (li, &v) in l.iter_mut().zip(x) {
            let w = v * v;
            let mut s_lx = slx - w * v * *li as f32;
            if s_lx <= 0.0 {
                continue;
            }
            let mut s_l2 = sl2 - w * *li as f32 * *li as f32;
            let new = nearest_int(v * s_l2 / s_lx).clamp(-nmax, nmax - 1);
            if new == *li {
                continue;
            }
            s_lx += w * v * new as f32;
            s_l2 += w * new as f32 * new as f32;
            if s_l2 > 0.0 && s_lx * s_lx * sl2 > slx * slx * s_l2 {
                *li = new;
                slx = s_lx;
                sl2 = s_l2;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for (o, &li) in q.iter_mut().zip(l.iter()) {
        *o = (li + nmax) as u8;
    }
    slx / sl2
}
