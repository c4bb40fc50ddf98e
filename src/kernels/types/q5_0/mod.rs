//! Q5_0: 32 weights per block, `w = d * (q - 16)` with `q` 5 bits (a nibble in `qs`, the fifth
//! bit in `qh`); Q8_0 activations. Repacked at load into 8-row groups on x86 ([`x8`]); in
//! place elsewhere (a dot kernel per token, tiles for batches).

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
use crate::quant::blocks::{BlockQ5_0, BlockQ8_0};
use crate::quant::dequant::dequantize_q5_0;
use crate::quant::GgmlType;

pub struct Q5_0;

const SCALAR: Dense<BlockQ5_0, BlockQ8_0> = scalar_dense::<Q5_0>();

impl WeightType for Q5_0 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    type Block = BlockQ5_0;
    type Act = BlockQ8_0;
    const BLOCK_LEN: usize = 32;

    fn dot(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
        debug_assert_eq!(w.len(), a.len());
        let mut sum = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let qh = u32::from_le_bytes(x.qh);
            let mut sumi = 0i32;
            for j in 0..16 {
                let h0 = ((qh >> j) & 1) << 4;
                let h1 = ((qh >> (j + 16)) & 1) << 4;
                let lo = ((x.qs[j] & 0x0f) as u32 | h0) as i32 - 16;
                let hi = ((x.qs[j] >> 4) as u32 | h1) as i32 - 16;
                sumi += lo * y.qs[j] as i32 + hi * y.qs[j + 16] as i32;
            }
            sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
        }
        sum
    }

    fn dequantize(b: &BlockQ5_0, out: &mut [f32]) {
        dequantize_q5_0(b, out.try_into().expect("one block"))
    }

    fn dense(path: CpuPath) -> &'static Dense<BlockQ5_0, BlockQ8_0> {
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

    fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<BlockQ5_0> {
        let mut v: Vec<BlockQ5_0> = random_raw(n, bits);
        v.iter_mut().for_each(|b| b.d = random_scale(bits()));
        v
    }

    fn layout() -> Option<&'static dyn LayoutKind> {
        Some(&x8::LAYOUT)
    }
}
