//! Q4_K x8 on AMX: each pair's block unpacked once to `scale · q` split into hi/lo byte tiles,
//! and the finishing step of the AVX-512 kernel per block and token.

use std::arch::x86_64::*;

use super::avx512::{q4_k_min_pairs, q4_k_min_sums};
use super::{BlockQ4Kx8, Q4Kx8};
use crate::kernels::packed::amx::kquant::{
    both_halves, matmul_pairs, split_products, store_register, TileWeights, TokenBlock,
};
use crate::kernels::packed::avx512::{lines, rows_f32, rows_u8};
use crate::kernels::packed::{Grouped, PackedKernels};

pub(super) const KERNELS: PackedKernels<Q4Kx8> = PackedKernels {
    tiles: Some(matmul_pairs::<Q4Kx8>),
    ..super::avx512::KERNELS
};

impl TileWeights for Grouped<BlockQ4Kx8> {
    type Block = BlockQ4Kx8;
    /// Row scales, row min scales, mins as i16 pairs.
    type Consts = (__m512, __m512, [__m512i; 4]);
    fn grouped(&self) -> &Grouped<BlockQ4Kx8> {
        self
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn unpack(x0: &BlockQ4Kx8, x1: &BlockQ4Kx8, out: *mut u8) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let m4 = _mm512_set1_epi8(15);
            for j in 0..8 {
                let s16 = both_halves(rows_u8(&x0.scales[j], &x1.scales[j]));
                // Register 8j + m: low (m < 4) or high nibbles of line 4j + m % 4.
                for m in 0..4 {
                    let v = lines(&x0.qs[4 * j + m], &x1.qs[4 * j + m]);
                    let low = _mm512_and_si512(v, m4);
                    let high = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    store_register(out, 8 * j + m, split_products(low, s16));
                    store_register(out, 8 * j + m + 4, split_products(high, s16));
                }
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn consts(x0: &BlockQ4Kx8, x1: &BlockQ4Kx8) -> Self::Consts {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let (d, dmin) = (rows_f32(&x0.d, &x1.d), rows_f32(&x0.dmin, &x1.dmin));
            (d, dmin, q4_k_min_pairs(x0, x1))
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn finish(
        (d, dmin, mn): &Self::Consts,
        y: &TokenBlock,
        isum: __m512i,
        acc: __m512,
    ) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let summ = q4_k_min_sums(mn, &y.side);
            let dy = _mm512_set1_ps(y.dy);
            let acc = _mm512_fmadd_ps(_mm512_mul_ps(*d, dy), _mm512_cvtepi32_ps(isum), acc);
            _mm512_fnmadd_ps(_mm512_mul_ps(*dmin, dy), _mm512_cvtepi32_ps(summ), acc)
        }
    }
}
