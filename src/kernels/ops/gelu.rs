//! GeGLU (`gate = gelu_tanh(gate) * up`, Gemma's FFN) through ggml's CPU table: GELU of every
//! f16 input, stored as f16. Using the same rounding keeps Gemma's logits within llama.cpp's.
//!
//! The scalar twin looks up one element at a time (two f16 conversions and a load); the AVX2
//! one converts 8 inputs with one `vcvtps2ph`, gathers their 8 table entries and converts
//! them back with one `vcvtph2ps`: the same entries, so the same bits.

use std::sync::OnceLock;

use half::f16;

/// GELU with the tanh approximation.
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

/// Inputs at or below this give 0, at or above [`IDENTITY_FROM`] themselves (ggml's bounds).
const ZERO_TO: f32 = -10.0;
const IDENTITY_FROM: f32 = 10.0;

/// `gelu_tanh` of every f16 bit pattern, as f16 bits, plus one entry of padding: the gather
/// reads 4 bytes at each entry, so the last one's read must stay inside the table.
fn table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu_tanh(f16::from_bits(bits).to_f32())).to_bits())
            .chain([0])
            .collect()
    })
}

/// GELU of one input through the table.
fn gelu_table(table: &[u16], x: f32) -> f32 {
    if x <= ZERO_TO {
        return 0.0;
    }
    if x >= IDENTITY_FROM {
        return x;
    }
    f16::from_bits(table[f16::from_f32(x).to_bits() as usize]).to_f32()
}

/// A backend's GeGLU over a prefix of `gate` through the table; returns how many elements it
/// did.
pub type PrefixFn = unsafe fn(&[u16], &mut [f32], &[f32]) -> usize;

/// The scalar twin does no prefix: [`geglu`] does every element.
pub fn no_prefix(_: &[u16], _: &mut [f32], _: &[f32]) -> usize {
    0
}

/// `gate[i] = gelu_tanh(gate[i]) * up[i]`, GELU through the f16 table, with `prefix` doing
/// what it can first.
///
/// # Safety
/// `prefix` must run on this CPU.
pub unsafe fn geglu(prefix: PrefixFn, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "geglu: lengths differ");
    let table = table();
    // SAFETY: the caller's promise; the table has its padding entry.
    let done = unsafe { prefix(table, gate, up) };
    for (g, &u) in gate[done..].iter_mut().zip(&up[done..]) {
        *g = gelu_table(table, *g) * u;
    }
}

/// The AVX2 + F16C version.
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use std::arch::x86_64::*;

    use super::{IDENTITY_FROM, ZERO_TO};

    /// GeGLU on the whole 8-float chunks; returns how many elements it did.
    ///
    /// # Safety
    /// Requires AVX2 and F16C, and `table` to hold 65537 entries.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn geglu(table: &[u16], gate: &mut [f32], up: &[f32]) -> usize {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            assert_eq!(table.len(), 1 << 16 | 1);
            let n = gate.len().min(up.len()) / 8 * 8;
            let base = table.as_ptr() as *const i32;
            let (lo, hi) = (_mm256_set1_ps(ZERO_TO), _mm256_set1_ps(IDENTITY_FROM));
            // The low two bytes of each 32-bit lane, gathered into the lane's low 8 bytes.
            let low_halves = _mm256_setr_epi8(
                0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, //
                0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
            );
            for i in (0..n).step_by(8) {
                let x = _mm256_loadu_ps(gate.as_ptr().add(i));
                let bits = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
                let idx = _mm256_cvtepu16_epi32(bits);
                // Entry `idx` is the low half of the 4 bytes at byte offset 2 idx.
                let raw = _mm256_i32gather_epi32::<2>(base, idx);
                let packed =
                    _mm256_permute4x64_epi64::<0b1000>(_mm256_shuffle_epi8(raw, low_halves));
                let g = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
                // Ordered compares: NaN keeps its table entry, as in the scalar twin.
                let g =
                    _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps::<_CMP_LE_OQ>(x, lo));
                let g = _mm256_blendv_ps(g, x, _mm256_cmp_ps::<_CMP_GE_OQ>(x, hi));
                let v = _mm256_mul_ps(g, _mm256_loadu_ps(up.as_ptr().add(i)));
                _mm256_storeu_ps(gate.as_mut_ptr().add(i), v);
            }
            n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{Backend, CpuPath};

    /// Edge inputs (the bounds, f16 overflow and underflow, signed zeros, NaN, infinities)
    /// between spread values.
    fn inputs(n: usize) -> Vec<f32> {
        let special = [
            ZERO_TO,
            IDENTITY_FROM,
            -9.999,
            9.999,
            -10.001,
            10.001,
            0.0,
            -0.0,
            1e-8,
            -6e-5,
            65519.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        (0..n)
            .map(|i| match i % 3 {
                0 => special[i / 3 % special.len()],
                _ => ((i as f32 * 0.618_034).fract() - 0.5) * 24.0,
            })
            .collect()
    }

    #[test]
    fn every_path_gives_the_scalar_bits() {
        let scalar = Backend::for_path(CpuPath::Scalar).unwrap();
        for b in Backend::available() {
            let path = b.path();
            for len in (0..40).chain([255, 256, 2048]) {
                let x = inputs(len);
                let up: Vec<f32> = x.iter().rev().map(|v| v * -0.25 + 0.5).collect();
                let (mut got, mut want) = (x.clone(), x.clone());
                b.geglu(&mut got, &up);
                scalar.geglu(&mut want, &up);
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                        "{path} len {len} at {i}: gelu({}) {a} vs {b}",
                        x[i]
                    );
                }
            }
        }
    }

    /// The table against GELU itself, within f16 rounding, and the bounds.
    #[test]
    fn table_is_gelu_in_f16() {
        let t = table();
        for x in [-3.0f32, -0.5, 0.0, 0.25, 1.0, 2.5, 9.5] {
            let want = gelu_tanh(x);
            let got = gelu_table(t, x);
            assert!(
                (got - want).abs() <= 2e-3 * want.abs().max(1e-2),
                "{x}: {got} vs {want}"
            );
        }
        assert_eq!(gelu_table(t, -12.0), 0.0);
        assert_eq!(gelu_table(t, 12.5), 12.5);
    }
}
