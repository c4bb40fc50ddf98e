//! Q4_K: 256 weights in 8 sub-blocks of 32, `w = d * sc * q - dmin * m` with `q` a nibble and
//! 6-bit `sc`, `m` per sub-block; Q8_K activations. Repacked at load into 8-row groups on x86
//! ([`x8`]); in place elsewhere (a dot kernel per token, tiles for batches).

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
use crate::quant::blocks::{BlockQ4K, BlockQ8K};
use crate::quant::dequant::dequantize_q4_k;
use crate::quant::dequant_k::unpack_k4_scales;
use crate::quant::GgmlType;

pub struct Q4K;

const SCALAR: Dense<BlockQ4K, BlockQ8K> = scalar_dense::<Q4K>();

impl WeightType for Q4K {
    const TYPE: GgmlType = GgmlType::Q4_K;
    type Block = BlockQ4K;
    type Act = BlockQ8K;
    const BLOCK_LEN: usize = 256;

    fn dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
        debug_assert_eq!(w.len(), a.len());
        let mut sum = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let (sc, m) = unpack_k4_scales(&x.scales);
            let mut isum = 0i32;
            for j in 0..4 {
                let (mut lo, mut hi) = (0i32, 0i32);
                for l in 0..32 {
                    let q = x.qs[32 * j + l];
                    lo += (q & 0x0f) as i32 * y.qs[64 * j + l] as i32;
                    hi += (q >> 4) as i32 * y.qs[64 * j + 32 + l] as i32;
                }
                isum += sc[2 * j] as i32 * lo + sc[2 * j + 1] as i32 * hi;
            }
            let summ: i32 = (0..16).map(|j| y.bsums[j] as i32 * m[j / 2] as i32).sum();
            sum += x.d.to_f32() * y.d * isum as f32 - x.dmin.to_f32() * y.d * summ as f32;
        }
        sum
    }

    fn dequantize(b: &BlockQ4K, out: &mut [f32]) {
        dequantize_q4_k(b, out.try_into().expect("one block"))
    }

    fn dense(path: CpuPath) -> &'static Dense<BlockQ4K, BlockQ8K> {
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

    fn random_blocks(n: usize, bits: &mut dyn FnMut() -> u64) -> Vec<BlockQ4K> {
        let mut v: Vec<BlockQ4K> = random_raw(n, bits);
        v.iter_mut()
            .for_each(|b| (b.d, b.dmin) = (random_scale(bits()), random_scale(bits())));
        v
    }

    fn layout() -> Option<&'static dyn LayoutKind> {
        Some(&x8::LAYOUT)
    }
}
