//! Q4_0: 32 weights per block, `w = d * (q - 8)` with `q` a nibble; Q8_0 activations. Used
//! in place on every path (no repacked layout): a dot kernel per token, tiles for batches.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;

use super::{random_raw, random_scale, scalar_dense, Dense, WeightType};
use crate::kernels::cpu::CpuPath;
use crate::quant::blocks::{BlockQ4_0, BlockQ8_0};
use crate::quant::dequant::dequantize_q4_0;
use crate::quant::GgmlType;

pub struct Q4_0;

const SCALAR: Dense<BlockQ4_0, BlockQ8_0> = scalar_dense::<Q4_0>();

impl WeightType for Q4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    type Block = BlockQ4_0;
    type Act = BlockQ8_0;
    const BLOCK_LEN: usize = 32;

    fn dot(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
        debug_assert_eq!(w.len(), a.len());
        let mut sum = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut sumi = 0i32;
            for j in 0..16 {
                let lo = (x.qs[j] & 0x0f) as i32 - 8;
                let hi = (x.qs[j] >> 4) as i32 - 8;
                sumi += lo * y.qs[j] as i32 + hi * y.qs[j + 16] as i32;
            }
            sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
        }
        sum
    }

    fn dequantize(b: &BlockQ4_0, out: &mut [f32]) {
        dequantize_q4_0(b, out.try_into().expect("one block"))
    }

    fn dense(path: CpuPath) -> &'static Dense<BlockQ4_0, BlockQ8_0> {
        match path {
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx2 => &avx2::DENSE,
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx512 | CpuPath::Amx => &avx512::DENSE,
            #[cfg(target_arch = "aarch64")]
            CpuPath::Neon => &neon::BASE,
            #[cfg(target_arch = "aarch64")]
            CpuPath::Dotprod => &neon::DOTPROD,
            #[cfg(target_arch = "aarch64")]
            CpuPath::I8mm => &neon::I8MM,
            _ => &SCALAR,
        }
    }

    fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<BlockQ4_0> {
        let mut v: Vec<BlockQ4_0> = random_raw(n, bits);
        v.iter_mut().for_each(|b| b.d = random_scale(bits()));
        v
    }
}
