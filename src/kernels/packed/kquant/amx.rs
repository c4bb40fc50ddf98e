//! The generic K-quant layouts on AMX: each pair's block unpacked once to `scale · (u −
//! offset)` (the offset taken off in the products, so the tile sums are the vector kernels'
//! `isum − OFFSET · corr`) and the AVX-512 kernel's finishing step per block and token.

use std::arch::x86_64::*;

use super::avx512::{coef_pairs, corrections, finish, KQuantAvx512};
use crate::kernels::packed::amx::kquant::{
    both_halves, split_products, store_register, TileWeights, TokenBlock,
};
use crate::kernels::packed::avx512::rows_f32;
use crate::kernels::packed::Grouped;

impl<S: KQuantAvx512> TileWeights for Grouped<S> {
    type Block = S;
    /// Row scales, row min scales, the coefficient pairs of the corrections (types with mins).
    type Consts = ((__m512, __m512), [__m512i; 8]);
    fn grouped(&self) -> &Grouped<S> {
        self
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn unpack(x0: &S, x1: &S, out: *mut u8) {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let off = _mm512_set1_epi8(if S::MINS { 0 } else { S::OFFSET_AVX512 as i8 });
            for j in 0..8 {
                let q = S::registers(x0, x1, j);
                for (m, q) in q.iter().enumerate() {
                    let s = if S::SUB == 32 { j } else { 2 * j + m / 4 };
                    let s16 = both_halves(S::scales(x0, x1, s));
                    let signed = _mm512_sub_epi8(*q, off);
                    store_register(out, 8 * j + m, split_products(signed, s16));
                }
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn consts(x0: &S, x1: &S) -> Self::Consts {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let ds = (rows_f32(x0.d(), x1.d()), rows_f32(x0.dmin(), x1.dmin()));
            let coef = if S::MINS {
                coef_pairs(x0, x1)
            } else {
                [_mm512_setzero_si512(); 8]
            };
            (ds, coef)
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn finish(
        (ds, coef): &Self::Consts,
        y: &TokenBlock,
        isum: __m512i,
        acc: __m512,
    ) -> __m512 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let corr = if S::MINS {
                corrections::<S>(coef, &y.bsums, &y.side)
            } else {
                _mm512_setzero_si512()
            };
            finish::<S>(*ds, y.dy, isum, corr, acc)
        }
    }
}
