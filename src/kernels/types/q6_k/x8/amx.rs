//! Q6_K x8 on AMX: each pair's block unpacked once to `scale · q` split into hi/lo byte tiles,
//! and the finishing step of the AVX-512 kernel per block and token.

use std::arch::x86_64::*;

use super::avx512::{q6_k_join, q6_k_top};
use super::{BlockQ6Kx8, Q6Kx8};
use crate::kernels::packed::amx::kquant::{
    both_halves, matmul_pairs, split_products, store_register, TileWeights, TokenBlock,
};
use crate::kernels::packed::avx512::{lines, rows_f32, rows_i8};
use crate::kernels::packed::{Grouped, PackedKernels};

pub(super) const KERNELS: PackedKernels<Q6Kx8> = PackedKernels {
    tiles: Some(matmul_pairs::<Q6Kx8>),
    ..super::avx512::KERNELS
};

impl TileWeights for Grouped<BlockQ6Kx8> {
    type Block = BlockQ6Kx8;
    /// Row scales.
    type Consts = __m512;
    fn grouped(&self) -> &Grouped<BlockQ6Kx8> {
        self
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn unpack(x0: &BlockQ6Kx8, x1: &BlockQ6Kx8, out: *mut u8) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let k32 = _mm512_set1_epi8(32);
            let both = |c: usize| both_halves(rows_i8(&x0.scales[c], &x1.scales[c]));
            for j in 0..8 {
                let line = |i: usize| lines(&x0.lines[j][i], &x1.lines[j][i]);
                let (h0, h1) = (line(4), line(5));
                // Register 8j + m (chunk 2j) from line m's low nibbles and bits 2m.. of line 4;
                // 8j + m + 4 (chunk 2j + 1) from its high nibbles and line 5. The offset of 32
                // goes into the products.
                let (sa, sb) = (both(2 * j), both(2 * j + 1));
                for m in 0..4 {
                    let v = line(m);
                    let low = q6_k_join(v, q6_k_top(h0, m));
                    let high = q6_k_join(_mm512_srli_epi16(v, 4), q6_k_top(h1, m));
                    let (low, high) = (_mm512_sub_epi8(low, k32), _mm512_sub_epi8(high, k32));
                    store_register(out, 8 * j + m, split_products(low, sa));
                    store_register(out, 8 * j + m + 4, split_products(high, sb));
                }
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn consts(x0: &BlockQ6Kx8, x1: &BlockQ6Kx8) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe { rows_f32(&x0.d, &x1.d) }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn finish(d: &__m512, y: &TokenBlock, isum: __m512i, acc: __m512) -> __m512 {
        let dy = _mm512_set1_ps(y.dy);
        _mm512_fmadd_ps(_mm512_mul_ps(*d, dy), _mm512_cvtepi32_ps(isum), acc)
    }
}
