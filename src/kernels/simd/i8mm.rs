//! aarch64 helpers for the int8 matrix-multiply extension (i8mm: Graviton 3+, Apple M2+,
//! Cortex-A510/A710 and later; not the Raspberry Pi 5). One `smmla` multiplies a 2×8 block of
//! weights (8 quants of two rows) by an 8×2 block of activations (8 quants of two tokens) into
//! the four i32 sums of that 2×2 tile: 32 multiply-adds, twice an `sdot`'s 16. So every i8mm
//! kernel takes two weight rows and an even number of tokens, with the two rows' (and two
//! tokens') 8-byte runs interleaved by `zip1`/`zip2` on 64-bit lanes.
//!
//! Lanes of every i32 and f32 tile vector: `[row 0 × token a, row 0 × token b, row 1 ×
//! token a, row 1 × token b]`.
//!
//! # Safety
//! Every `unsafe fn` here requires NEON, and those using `smmla` the i8mm extension.

use std::arch::aarch64::*;

use crate::quant::blocks::BlockQ8K;

/// `a = [a0 (8 bytes), a1]`. Stable Rust has no `smmla` intrinsic, so it is one `asm!`
/// instruction in a function compiled for the extension.
#[inline]
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn mmla(acc: int32x4_t, w: int8x16_t, a: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: a register-only instruction of the extension this function is compiled for.
    unsafe {
        std::arch::asm!(
            "smmla {acc:v}.4s, {w:v}.16b, {a:v}.16b",
            acc = inout(vreg) acc,
            w = in(vreg) w,
            a = in(vreg) a,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// `[x[0..8], y[0..8]]` and `[x[8..16], y[8..16]]`: two rows' 8-quant runs side by side.
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn zip8(x: int8x16_t, y: int8x16_t) -> [int8x16_t; 2] {
    let (x, y) = (vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y));
    [
        vreinterpretq_s8_s64(vzip1q_s64(x, y)),
        vreinterpretq_s8_s64(vzip2q_s64(x, y)),
    ]
}

/// 32 quants of two rows, each as two vectors of 16, interleaved for [`tile_dot`].
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn zip32(x: [int8x16_t; 2], y: [int8x16_t; 2]) -> [int8x16_t; 4] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let (lo, hi) = (zip8(x[0], y[0]), zip8(x[1], y[1]));
        [lo[0], lo[1], hi[0], hi[1]]
    }
}

/// `acc[p] += d_w · d_a · sums[p]` for every token pair `p` of a super-block `b` of Q8_K
/// activations (the f32 steps of the K-quant tiles without minimums, in the scalar twins'
/// order).
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn add_q8k_block<const T: usize>(
    acc: &mut [float32x4_t; T],
    sums: &[int32x4_t; T],
    dw: float32x4_t,
    a: &[&[BlockQ8K]; T],
    b: usize,
) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        for p in 0..T / 2 {
            let da = per_token(a[2 * p][b].d, a[2 * p + 1][b].d);
            let v = vmulq_f32(vmulq_f32(dw, da), vcvtq_f32_s32(sums[p]));
            acc[p] = vaddq_f32(acc[p], v);
        }
    }
}

/// 16 quants of two rows (or tokens) from `x` and `y`, interleaved for [`mmla`].
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn load_zip16(x: *const i8, y: *const i8) -> [int8x16_t; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe { zip8(vld1q_s8(x), vld1q_s8(y)) }
}

/// The 2×2 tile of sums over `n` 8-quant steps: `w[i]` interleaved weights, the activations of
/// tokens a and b at `xa`, `xb`.
#[inline]
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn tile_dot<const N: usize>(
    w: &[int8x16_t; N],
    xa: *const i8,
    xb: *const i8,
) -> int32x4_t {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut s = vdupq_n_s32(0);
        for j in 0..N / 2 {
            let a = load_zip16(xa.add(16 * j), xb.add(16 * j));
            s = mmla(s, w[2 * j], a[0]);
            s = mmla(s, w[2 * j + 1], a[1]);
        }
        s
    }
}

/// `[x, x, y, y]`: one value per row, both tokens.
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn per_row(x: f32, y: f32) -> float32x4_t {
    vcombine_f32(vdup_n_f32(x), vdup_n_f32(y))
}

/// `[x, y, x, y]`: one value per token, both rows.
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn per_token(x: f32, y: f32) -> float32x4_t {
    let v = vset_lane_f32::<1>(y, vdup_n_f32(x));
    vcombine_f32(v, v)
}

/// `[x, x, y, y]` in i32.
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn per_row_i32(x: i32, y: i32) -> int32x4_t {
    vcombine_s32(vdup_n_s32(x), vdup_n_s32(y))
}

/// The tile vectors (`T / 2` of them) as `out[row][token]`.
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn unzip_tiles<const T: usize>(acc: &[float32x4_t; T]) -> [[f32; T]; 2] {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut out = [[0.0; T]; 2];
        for p in 0..T / 2 {
            let mut v = [0f32; 4];
            vst1q_f32(v.as_mut_ptr(), acc[p]);
            out[0][2 * p] = v[0];
            out[0][2 * p + 1] = v[1];
            out[1][2 * p] = v[2];
            out[1][2 * p + 1] = v[3];
        }
        out
    }
}
