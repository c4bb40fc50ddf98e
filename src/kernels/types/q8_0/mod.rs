//! Q8_0: 32 weights per block, `w = d * q` with `q` a signed byte; also the activation format
//! of the 32-quant types. Repacked at load into 8-row groups on x86 ([`x8`]); in place
//! elsewhere (a dot kernel per token, tiles for batches).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
mod x8;

use super::{random_raw, random_scale, scalar_dense, Dense, WeightType};
use crate::kernels::cpu::CpuPath;
use crate::kernels::packed::LayoutKind;
use crate::quant::blocks::BlockQ8_0;
use crate::quant::dequant::dequantize_q8_0;
use crate::quant::GgmlType;

pub struct Q8_0;

const SCALAR: Dense<BlockQ8_0, BlockQ8_0> = scalar_dense::<Q8_0>();

impl WeightType for Q8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    type Block = BlockQ8_0;
    type Act = BlockQ8_0;
    const BLOCK_LEN: usize = 32;

    fn dot(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
        debug_assert_eq!(w.len(), a.len());
        let mut sum = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let sumi: i32 =
                x.qs.iter()
                    .zip(&y.qs)
                    .map(|(&p, &q)| p as i32 * q as i32)
                    .sum();
            sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
        }
        sum
    }

    fn dequantize(b: &BlockQ8_0, out: &mut [f32]) {
        dequantize_q8_0(b, out.try_into().expect("one block"))
    }

    fn dense(path: CpuPath) -> &'static Dense<BlockQ8_0, BlockQ8_0> {
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

    fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<BlockQ8_0> {
        let mut v: Vec<BlockQ8_0> = random_raw(n, bits);
        v.iter_mut().for_each(|b| b.d = random_scale(bits()));
        v
    }

    fn layout() -> Option<&'static dyn LayoutKind> {
        Some(&x8::LAYOUT)
    }
}
