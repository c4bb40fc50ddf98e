//! Q3_K: 256 weights in 16 sub-blocks of 16, a 3-bit quant per weight (the high bit in
//! `hmask`) and a 6-bit scale per sub-block; Q8_K activations. Only the scalar twin so far.

use super::{random_raw, random_scale, scalar_dense, Dense, WeightType};
use crate::kernels::cpu::CpuPath;
use crate::quant::blocks::{BlockQ3K, BlockQ8K};
use crate::quant::dequant::{dequantize_q3_k, unpack_q3_k_scales};
use crate::quant::GgmlType;

pub struct Q3K;

const SCALAR: Dense<BlockQ3K, BlockQ8K> = scalar_dense::<Q3K>();

impl WeightType for Q3K {
    const TYPE: GgmlType = GgmlType::Q3_K;
    type Block = BlockQ3K;
    type Act = BlockQ8K;
    const BLOCK_LEN: usize = 256;

    fn dot(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
        debug_assert_eq!(w.len(), a.len());
        let mut sum = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let scales = unpack_q3_k_scales(&x.scales);
            let mut isum = 0i32;
            for h in 0..2 {
                for s in 0..4 {
                    let bit = 1u8 << (4 * h + s);
                    for half in 0..2 {
                        let mut acc = 0i32;
                        for l in 16 * half..16 * half + 16 {
                            let mut q = ((x.qs[32 * h + l] >> (2 * s)) & 3) as i32;
                            if x.hmask[l] & bit == 0 {
                                q -= 4;
                            }
                            acc += q * y.qs[128 * h + 32 * s + l] as i32;
                        }
                        isum += scales[8 * h + 2 * s + half] as i32 * acc;
                    }
                }
            }
            sum += x.d.to_f32() * y.d * isum as f32;
        }
        sum
    }

    fn dequantize(b: &BlockQ3K, out: &mut [f32]) {
        dequantize_q3_k(b, out.try_into().expect("one block"))
    }

    fn dense(path: CpuPath) -> &'static Dense<BlockQ3K, BlockQ8K> {
        let _ = path;
        &SCALAR
    }

    fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<BlockQ3K> {
        let mut v: Vec<BlockQ3K> = random_raw(n, bits);
        v.iter_mut().for_each(|b| b.d = random_scale(bits()));
        v
    }
}
