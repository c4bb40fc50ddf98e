//! Q3_K on NEON: the dot per token in both builds ([`two_builds`]): four 16-quant sub-block
//! sums per vector, times their signed 6-bit scales; and i8mm tiles: per sub-block the 2×2
//! tile of sums times each row's scale. Integer sums and f32 steps are the scalar twin's, so
//! the results match it bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON (the dotprod build its extension, the tiles i8mm too),
//! activations from the crate's quantizers and, for tiles, an even token count.

use std::arch::aarch64::*;

use crate::kernels::simd::i8mm::{
    add_q8k_block, per_row, per_row_i32, tile_dot, unzip_tiles, zip8,
};
use crate::kernels::simd::neon::two_builds;
use crate::kernels::types::{common_len, tiles, Dense, TileSet};
use crate::quant::blocks::{BlockQ3K, BlockQ8K};
use crate::quant::dequant::unpack_q3_k_scales;

pub(super) const BASE: Dense<BlockQ3K, BlockQ8K> = Dense {
    dot: base::dot,
    dot_isa: "neon",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const DOTPROD: Dense<BlockQ3K, BlockQ8K> = Dense {
    dot: dotprod::dot,
    dot_isa: "dotprod",
    tiles: TileSet::None,
    tiles_isa: "",
};

pub(super) const I8MM: Dense<BlockQ3K, BlockQ8K> = Dense {
    tiles: tiles!(Pairs, tile),
    tiles_isa: "i8mm",
    ..DOTPROD
};

/// A block's quants in the order the kernels walk them: `k = 4h + s` (`h` the half of the
/// block, `s` the 2-bit field) gives elements `128h + 32s + l`, `l = 0..32`, as two vectors of
/// 16 in `-4..4` (sub-blocks `2k` and `2k + 1`). Call with `k = 0, 1, .., 7` in turn: it
/// carries the shifted `qs` and `hmask` from one call to the next.
struct Walk {
    qs: [uint8x16_t; 2],
    hm: [uint8x16_t; 2],
}

impl Walk {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn new(x: &BlockQ3K) -> Walk {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let (q, m) = (x.qs.as_ptr(), x.hmask.as_ptr());
            Walk {
                qs: [vld1q_u8(q), vld1q_u8(q.add(16))],
                hm: [vld1q_u8(m), vld1q_u8(m.add(16))],
            }
        }
    }

    /// The quants of step `k` (see the type's docs), then on to step `k + 1`.
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn next(&mut self, x: &BlockQ3K, k: usize) -> [int8x16_t; 2] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            if k == 4 {
                // The second half of the block: its own 2-bit fields, hmask bits 4..8.
                let q = x.qs.as_ptr().add(32);
                self.qs = [vld1q_u8(q), vld1q_u8(q.add(16))];
            }
            let (m3, four) = (vdupq_n_u8(3), vdupq_n_u8(4));
            // q = (2 bits | 4 * hmask bit) - 4: a clear hmask bit subtracts 4.
            let q = |qs: uint8x16_t, hm: uint8x16_t| {
                let v = vorrq_u8(vandq_u8(qs, m3), vandq_u8(vshlq_n_u8(hm, 2), four));
                vsubq_s8(vreinterpretq_s8_u8(v), vreinterpretq_s8_u8(four))
            };
            let out = [q(self.qs[0], self.hm[0]), q(self.qs[1], self.hm[1])];
            self.qs = [vshrq_n_u8(self.qs[0], 2), vshrq_n_u8(self.qs[1], 2)];
            self.hm = [vshrq_n_u8(self.hm[0], 1), vshrq_n_u8(self.hm[1], 1)];
            out
        }
    }
}

two_builds!(
    /// Q3_K weights × Q8_K activations.
    base,
    dotprod,
    |dot4, _dot32| {
        /// Q3_K weights × Q8_K activations.
        ///
        /// # Safety
        /// See the module docs.
        pub unsafe fn dot(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's `# Safety` contract, which the caller upholds.
            unsafe {
                let zero = vdupq_n_s32(0);
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let scales = widen(&unpack_q3_k_scales(&x.scales));
                    let mut walk = Walk::new(x);
                    let mut isum = zero;
                    // Two steps of two sub-blocks each fill one vector of four sums.
                    for (g, &scale) in scales.iter().enumerate() {
                        let mut subs = [zero; 4];
                        for i in 0..2 {
                            let k = 2 * g + i;
                            let q = walk.next(x, k);
                            let q8 = y.qs.as_ptr().add(32 * k);
                            subs[2 * i] = dot4(zero, q[0], vld1q_s8(q8));
                            subs[2 * i + 1] = dot4(zero, q[1], vld1q_s8(q8.add(16)));
                        }
                        isum = vmlaq_s32(isum, lane_sums(&subs), scale);
                    }
                    sum += x.d.to_f32() * y.d * vaddvq_s32(isum) as f32;
                }
                sum
            }
        }
    }
);

/// Q3_K weights × Q8_K activations, 2 rows × `T` tokens: per 16-quant sub-block the 2×2 tile
/// of sums times each row's signed 6-bit scale.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn tile<const T: usize>(w: [&[BlockQ3K]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        const { assert!(T.is_multiple_of(2)) };
        let n = common_len(&w, &a);
        let mut acc = [vdupq_n_f32(0.0); T];
        for b in 0..n {
            let (x0, x1) = (&w[0][b], &w[1][b]);
            let (sc0, sc1) = (
                unpack_q3_k_scales(&x0.scales),
                unpack_q3_k_scales(&x1.scales),
            );
            let (mut walk0, mut walk1) = (Walk::new(x0), Walk::new(x1));
            let mut isum = [vdupq_n_s32(0); T];
            for k in 0..8 {
                let (q0, q1) = (walk0.next(x0, k), walk1.next(x1, k));
                for half in 0..2 {
                    let wz = zip8(q0[half], q1[half]);
                    let s = 2 * k + half;
                    let scale = per_row_i32(sc0[s] as i32, sc1[s] as i32);
                    for p in 0..T / 2 {
                        let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                        let at = 16 * s;
                        let sums = tile_dot(&wz, ya.qs.as_ptr().add(at), yb.qs.as_ptr().add(at));
                        isum[p] = vmlaq_s32(isum[p], sums, scale);
                    }
                }
            }
            let dw = per_row(x0.d.to_f32(), x1.d.to_f32());
            add_q8k_block(&mut acc, &isum, dw, &a, b);
        }
        unzip_tiles(&acc)
    }
}

/// `[Σ v[0], Σ v[1], Σ v[2], Σ v[3]]`: four sub-blocks' sums in one vector.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn lane_sums(v: &[int32x4_t; 4]) -> int32x4_t {
    vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]))
}

/// The 16 signed scales as four i32 vectors of 4.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn widen(sc: &[i8; 16]) -> [int32x4_t; 4] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let sc = vld1q_s8(sc.as_ptr());
        let (lo, hi) = (vmovl_s8(vget_low_s8(sc)), vmovl_high_s8(sc));
        [
            vmovl_s16(vget_low_s16(lo)),
            vmovl_high_s16(lo),
            vmovl_s16(vget_low_s16(hi)),
            vmovl_high_s16(hi),
        ]
    }
}
