//! The Gated DeltaNet step on one head's state, row by row: the decode step's whole cost. Each
//! value row of the state is read and written once per token: decayed, dotted with the key,
//! corrected toward the value, dotted with the query. Scalar twin here, AVX2 and NEON beside.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "aarch64")]
pub mod neon;

/// A version of [`delta_rows`]: (state, q, k, v, [decay, beta, scale], out).
pub type RowsFn = unsafe fn(&mut [f32], &[f32], &[f32], &[f32], [f32; 3], &mut [f32]);

/// Per value row `j` of `s` ([head_v][head_k], rows of `k.len()`):
/// `row *= decay; delta = beta (v[j] - row . k); row += delta k; o[j] = scale (row . q)`.
/// Sums in f32, in order.
pub fn delta_rows(s: &mut [f32], q: &[f32], k: &[f32], v: &[f32], gates: [f32; 3], o: &mut [f32]) {
    let [decay, beta, scale] = gates;
    for (j, row) in s.chunks_exact_mut(k.len().max(1)).enumerate() {
        let mut sk = 0f32;
        for (x, &kk) in row.iter_mut().zip(k) {
            *x *= decay;
            sk += *x * kk;
        }
        let delta = (v[j] - sk) * beta;
        let mut sq = 0f32;
        for ((x, &kk), &qq) in row.iter_mut().zip(k).zip(q) {
            *x += delta * kk;
            sq += *x * qq;
        }
        o[j] = sq * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::delta_rows;

    /// The row-by-row step against the delta rule written with a full matrix.
    #[test]
    fn rows_compute_the_delta_rule() {
        let (hk, hv) = (4, 3);
        let mut s: Vec<f32> = (0..hk * hv).map(|i| (i as f32 * 0.37).sin()).collect();
        let q = [0.5, -0.1, 0.3, 0.2];
        let k = [0.1, 0.4, -0.6, 0.2];
        let v = [1.0, -2.0, 0.5];
        let (decay, beta, scale) = (0.9, 0.7, 0.5);
        // S[i][j] (key i, value j) = s[j * hk + i].
        let mut m = [[0f32; 3]; 4];
        for (i, row) in m.iter_mut().enumerate() {
            for (j, x) in row.iter_mut().enumerate() {
                *x = s[j * hk + i] * decay;
            }
        }
        let mut want = [0f32; 3];
        for j in 0..hv {
            let sk: f32 = (0..hk).map(|i| m[i][j] * k[i]).sum();
            let delta = beta * (v[j] - sk);
            (0..hk).for_each(|i| m[i][j] += k[i] * delta);
            want[j] = scale * (0..hk).map(|i| m[i][j] * q[i]).sum::<f32>();
        }
        let mut o = [0f32; 3];
        delta_rows(&mut s, &q, &k, &v, [decay, beta, scale], &mut o);
        for j in 0..hv {
            assert!(
                (o[j] - want[j]).abs() < 1e-6,
                "{j}: {} vs {}",
                o[j],
                want[j]
            );
            for i in 0..hk {
                assert!((s[j * hk + i] - m[i][j]).abs() < 1e-6);
            }
        }
    }
}
