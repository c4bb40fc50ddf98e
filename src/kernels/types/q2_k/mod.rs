//! Q2_K: 256 weights in 16 sub-blocks of 16, a 2-bit quant per weight and a 4-bit scale and
//! min per sub-block; Q8_K activations. Only the scalar twin so far.

use super::{random_raw, random_scale, scalar_dense, Dense, WeightType};
use crate::kernels::cpu::CpuPath;
use crate::quant::blocks::{BlockQ2K, BlockQ8K};
use crate::quant::dequant::dequantize_q2_k;
use crate::quant::GgmlType;

pub struct Q2K;

const SCALAR: Dense<BlockQ2K, BlockQ8K> = scalar_dense::<Q2K>();

impl WeightType for Q2K {
    const TYPE: GgmlType = GgmlType::Q2_K;
    type Block = BlockQ2K;
    type Act = BlockQ8K;
    const BLOCK_LEN: usize = 256;

    fn dot(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
        debug_assert_eq!(w.len(), a.len());
        let mut sum = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let summs: i32 = (0..16)
                .map(|j| y.bsums[j] as i32 * (x.scales[j] >> 4) as i32)
                .sum();
            let mut isum = 0i32;
            // Element 128*h + 32*s + l reads bits 2s..2s+2 of qs[32*h + l]; scale index 2*(4h+s) +
            // (l >= 16).
            for h in 0..2 {
                for s in 0..4 {
                    for half in 0..2 {
                        let sc = (x.scales[8 * h + 2 * s + half] & 0x0f) as i32;
                        let mut acc = 0i32;
                        for l in 16 * half..16 * half + 16 {
                            let q = ((x.qs[32 * h + l] >> (2 * s)) & 3) as i32;
                            acc += q * y.qs[128 * h + 32 * s + l] as i32;
                        }
                        isum += sc * acc;
                    }
                }
            }
            let dall = y.d * x.d.to_f32();
            let dmin = y.d * x.dmin.to_f32();
            sum += dall * isum as f32 - dmin * summs as f32;
        }
        sum
    }

    fn dequantize(b: &BlockQ2K, out: &mut [f32]) {
        dequantize_q2_k(b, out.try_into().expect("one block"))
    }

    fn dense(path: CpuPath) -> &'static Dense<BlockQ2K, BlockQ8K> {
        let _ = path;
        &SCALAR
    }

    fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<BlockQ2K> {
        let mut v: Vec<BlockQ2K> = random_raw(n, bits);
        v.iter_mut()
            .for_each(|b| (b.d, b.dmin) = (random_scale(bits()), random_scale(bits())));
        v
    }
}
