//! The tiled attention's f32 row operations: several queries' dots against a run of key rows,
//! and several accumulators' weighted sums of value rows, each row read once for all of them.
//! Scalar twins here, AVX2 and AVX-512 versions beside.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;

/// `out[g * stride + j] = q[g] · rows[j]` for the `d`-long queries packed in `q` and rows
/// packed in `rows`; products in f32, sums in f64.
pub fn f32_dots(q: &[f32], d: usize, rows: &[f32], out: &mut [f32], stride: usize) {
    for (g, qg) in q.chunks_exact(d.max(1)).enumerate() {
        for (j, r) in rows.chunks_exact(d.max(1)).enumerate() {
            let dot: f64 = qg.iter().zip(r).map(|(x, y)| (x * y) as f64).sum();
            out[g * stride + j] = dot as f32;
        }
    }
}

/// `acc[g] += sum_j w[g * stride + j] * rows[j]` for the `d`-long accumulators packed in `acc`,
/// row by row, each element fused (as the SIMD versions).
pub fn f32_weighted_sum(acc: &mut [f32], d: usize, rows: &[f32], w: &[f32], stride: usize) {
    for (g, a) in acc.chunks_exact_mut(d.max(1)).enumerate() {
        for (j, r) in rows.chunks_exact(d.max(1)).enumerate() {
            let wj = w[g * stride + j];
            for (a, x) in a.iter_mut().zip(r) {
                *a = x.mul_add(wj, *a);
            }
        }
    }
}
