//! aarch64 tile kernels for cores with the int8 matrix-multiply extension (i8mm: Graviton 3+,
//! Apple M2+, Cortex-A510/A710 and later; not the Raspberry Pi 5). One `smmla` multiplies a
//! 2×8 block of weights (8 quants of two rows) by an 8×2 block of activations (8 quants of two
//! tokens) into the four i32 sums of that 2×2 tile: 32 multiply-adds, twice an `sdot`'s 16.
//! So every kernel here takes two weight rows and an even number of tokens, with the two
//! rows' (and two tokens') 8-byte runs interleaved by `zip1`/`zip2` on 64-bit lanes.
//!
//! Lanes of every i32 and f32 tile vector: `[row 0 × token a, row 0 × token b, row 1 ×
//! token a, row 1 × token b]`. Per (row, token) and block, the integer sums are exactly those
//! of [`super::scalar`]'s dot kernels, and the f32 steps are the same (no fused multiply-add),
//! so every result matches the scalar twin bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON with dotprod and i8mm ([`detected`]), an even token
//! count `T`, and activations from the crate's quantizers. Rows should have equal block counts;
//! only the shortest row's count is used.

use std::arch::aarch64::*;

use super::common_len;
use super::neon::q5_high_bits;
use super::scalar::unpack_k4_scales;
use crate::quant::blocks::*;

/// Whether the CPU has the int8 matrix-multiply extension (and the dot product, which every
/// i8mm core has; the dot kernels of this path are the dotprod ones).
pub fn detected() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
        && std::arch::is_aarch64_feature_detected!("i8mm")
}

/// `acc += [w0·a0, w0·a1, w1·a0, w1·a1]` over 8 quants, where `w = [w0 (8 bytes), w1]` and
/// `a = [a0 (8 bytes), a1]`. Stable Rust has no `smmla` intrinsic, so it is one `asm!`
/// instruction in a function compiled for the extension.
#[inline]
#[target_feature(enable = "neon,i8mm")]
unsafe fn mmla(acc: int32x4_t, w: int8x16_t, a: int8x16_t) -> int32x4_t {
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
unsafe fn zip8(x: int8x16_t, y: int8x16_t) -> [int8x16_t; 2] {
    let (x, y) = (vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y));
    [
        vreinterpretq_s8_s64(vzip1q_s64(x, y)),
        vreinterpretq_s8_s64(vzip2q_s64(x, y)),
    ]
}

/// 16 quants of two rows (or tokens) from `x` and `y`, interleaved for [`mmla`].
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_zip16(x: *const i8, y: *const i8) -> [int8x16_t; 2] {
    zip8(vld1q_s8(x), vld1q_s8(y))
}

/// The 2×2 tile of sums over `n` 8-quant steps: `w[i]` interleaved weights, the activations of
/// tokens a and b at `xa`, `xb`.
#[inline]
#[target_feature(enable = "neon,i8mm")]
unsafe fn tile_dot<const N: usize>(w: &[int8x16_t; N], xa: *const i8, xb: *const i8) -> int32x4_t {
    let mut s = vdupq_n_s32(0);
    for j in 0..N / 2 {
        let a = load_zip16(xa.add(16 * j), xb.add(16 * j));
        s = mmla(s, w[2 * j], a[0]);
        s = mmla(s, w[2 * j + 1], a[1]);
    }
    s
}

/// `[x, x, y, y]`: one value per row, both tokens.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn per_row(x: f32, y: f32) -> float32x4_t {
    vcombine_f32(vdup_n_f32(x), vdup_n_f32(y))
}

/// `[x, y, x, y]`: one value per token, both rows.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn per_token(x: f32, y: f32) -> float32x4_t {
    let v = vset_lane_f32::<1>(y, vdup_n_f32(x));
    vcombine_f32(v, v)
}

/// `[x, x, y, y]` in i32.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn per_row_i32(x: i32, y: i32) -> int32x4_t {
    vcombine_s32(vdup_n_s32(x), vdup_n_s32(y))
}

/// The tile vectors (`T / 2` of them) as `out[row][token]`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn unzip_tiles<const T: usize>(acc: &[float32x4_t; T]) -> [[f32; T]; 2] {
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

/// Tile kernels for the 32-quant block types: `$unpack` turns a block into its 32 signed
/// quants (two vectors of 16); every (row, token) gets `sumi * d_w * d_a` per block, in
/// block order, as the scalar kernel does.
macro_rules! q8_family_tile {
    ($(#[$doc:meta])* $name:ident, $B:ty, |$x:ident| $unpack:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// See the module docs.
        #[target_feature(enable = "neon,dotprod,i8mm")]
        pub unsafe fn $name<const T: usize>(w: [&[$B]; 2], a: [&[BlockQ8_0]; T]) -> [[f32; T]; 2] {
            const { assert!(T.is_multiple_of(2)) };
            let n = common_len(&w, &a);
            let mut acc = [vdupq_n_f32(0.0); T];
            for b in 0..n {
                let unpack = |$x: &$B| -> (int8x16_t, int8x16_t) { $unpack };
                let (w0, w1) = (unpack(&w[0][b]), unpack(&w[1][b]));
                let lo = zip8(w0.0, w1.0);
                let hi = zip8(w0.1, w1.1);
                let wz = [lo[0], lo[1], hi[0], hi[1]];
                let dw = per_row(w[0][b].d.to_f32(), w[1][b].d.to_f32());
                for p in 0..T / 2 {
                    let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                    let sumi = tile_dot(&wz, ya.qs.as_ptr(), yb.qs.as_ptr());
                    let da = per_token(ya.d.to_f32(), yb.d.to_f32());
                    let v = vmulq_f32(vmulq_f32(vcvtq_f32_s32(sumi), dw), da);
                    acc[p] = vaddq_f32(acc[p], v);
                }
            }
            unzip_tiles(&acc)
        }
    };
}

q8_family_tile!(
    /// Q4_0 weights × Q8_0 activations, 2 rows × `T` tokens.
    q4_0_tile,
    BlockQ4_0,
    |x| {
        let q = vld1q_u8(x.qs.as_ptr());
        let (m4, off) = (vdupq_n_u8(15), vdupq_n_s8(8));
        (
            vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), off),
            vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), off),
        )
    }
);

q8_family_tile!(
    /// Q5_0 weights × Q8_0 activations, 2 rows × `T` tokens.
    q5_0_tile,
    BlockQ5_0,
    |x| {
        let q = vld1q_u8(x.qs.as_ptr());
        let (m4, off) = (vdupq_n_u8(15), vdupq_n_s8(16));
        let (h0, h1) = q5_high_bits(&x.qh);
        let lo = vorrq_u8(vandq_u8(q, m4), h0);
        let hi = vorrq_u8(vshrq_n_u8(q, 4), h1);
        (
            vsubq_s8(vreinterpretq_s8_u8(lo), off),
            vsubq_s8(vreinterpretq_s8_u8(hi), off),
        )
    }
);

q8_family_tile!(
    /// Q8_0 weights × Q8_0 activations, 2 rows × `T` tokens.
    q8_0_tile,
    BlockQ8_0,
    |x| (vld1q_s8(x.qs.as_ptr()), vld1q_s8(x.qs.as_ptr().add(16)))
);

/// Q4_K weights × Q8_K activations, 2 rows × `T` tokens: per 32-quant sub-block the 2×2 tile
/// of sums times each row's 6-bit scale, the minimums from the activations' 16-quant sums.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn q4_k_tile<const T: usize>(w: [&[BlockQ4K]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    const { assert!(T.is_multiple_of(2)) };
    let n = common_len(&w, &a);
    let m4 = vdupq_n_u8(15);
    let mut acc = [vdupq_n_f32(0.0); T];
    for b in 0..n {
        let (x0, x1) = (&w[0][b], &w[1][b]);
        let ((sc0, m0), (sc1, m1)) = (unpack_k4_scales(&x0.scales), unpack_k4_scales(&x1.scales));
        let mut isum = [vdupq_n_s32(0); T];
        for j in 0..4 {
            let (q0, q1) = (x0.qs.as_ptr().add(32 * j), x1.qs.as_ptr().add(32 * j));
            let (r0, r1) = (
                [vld1q_u8(q0), vld1q_u8(q0.add(16))],
                [vld1q_u8(q1), vld1q_u8(q1.add(16))],
            );
            let nib = |v: uint8x16_t| vreinterpretq_s8_u8(vandq_u8(v, m4));
            let top = |v: uint8x16_t| vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
            // Sub-block 2j from the low nibbles, 2j + 1 from the high ones.
            let lo = [zip8(nib(r0[0]), nib(r1[0])), zip8(nib(r0[1]), nib(r1[1]))];
            let hi = [zip8(top(r0[0]), top(r1[0])), zip8(top(r0[1]), top(r1[1]))];
            let subs = [
                ([lo[0][0], lo[0][1], lo[1][0], lo[1][1]], 2 * j),
                ([hi[0][0], hi[0][1], hi[1][0], hi[1][1]], 2 * j + 1),
            ];
            for (wz, s) in subs {
                let scale = per_row_i32(sc0[s] as i32, sc1[s] as i32);
                for p in 0..T / 2 {
                    let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                    let off = 32 * s;
                    let sums = tile_dot(&wz, ya.qs.as_ptr().add(off), yb.qs.as_ptr().add(off));
                    isum[p] = vmlaq_s32(isum[p], sums, scale);
                }
            }
        }
        // Minimums: sum over sub-blocks of (the activations' 32-quant sum) × min, per pair.
        let mins = [mins16(&m0), mins16(&m1)];
        let (dw, dmin) = (
            per_row(x0.d.to_f32(), x1.d.to_f32()),
            per_row(x0.dmin.to_f32(), x1.dmin.to_f32()),
        );
        for p in 0..T / 2 {
            let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
            let (sa, sb) = (sub_sums(&ya.bsums), sub_sums(&yb.bsums));
            let summ = [
                min_dot(sa, mins[0]),
                min_dot(sb, mins[0]),
                min_dot(sa, mins[1]),
                min_dot(sb, mins[1]),
            ];
            let summ = vcvtq_f32_s32(vld1q_s32(summ.as_ptr()));
            let da = per_token(ya.d, yb.d);
            let scaled = vmulq_f32(vmulq_f32(dw, da), vcvtq_f32_s32(isum[p]));
            let min = vmulq_f32(vmulq_f32(dmin, da), summ);
            acc[p] = vaddq_f32(acc[p], vsubq_f32(scaled, min));
        }
    }
    unzip_tiles(&acc)
}

/// A Q4_K block's 8 minimums as i16 lanes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn mins16(m: &[u8; 8]) -> int16x8_t {
    vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m.as_ptr())))
}

/// The 8 sums of 32 activations from the 16 sums of 16 (each |sum| <= 32 * 127: fits i16).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn sub_sums(bsums: &[i16; 16]) -> int16x8_t {
    vpaddq_s16(vld1q_s16(bsums.as_ptr()), vld1q_s16(bsums.as_ptr().add(8)))
}

/// `sum(s[i] * m[i])` in i32.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn min_dot(s: int16x8_t, m: int16x8_t) -> i32 {
    let lo = vmull_s16(vget_low_s16(s), vget_low_s16(m));
    vaddvq_s32(vmlal_high_s16(lo, s, m))
}

/// Q6_K weights × Q8_K activations, 2 rows × `T` tokens: per 16-quant sub-block the 2×2 tile
/// of sums times each row's signed 8-bit scale.
///
/// # Safety
/// See the module docs.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub unsafe fn q6_k_tile<const T: usize>(w: [&[BlockQ6K]; 2], a: [&[BlockQ8K]; T]) -> [[f32; T]; 2] {
    const { assert!(T.is_multiple_of(2)) };
    let n = common_len(&w, &a);
    let (m4, m2, off) = (vdupq_n_u8(15), vdupq_n_u8(0x30), vdupq_n_s8(32));
    let mut acc = [vdupq_n_f32(0.0); T];
    for b in 0..n {
        let (x0, x1) = (&w[0][b], &w[1][b]);
        let mut isum = [vdupq_n_s32(0); T];
        for h in 0..2 {
            // Quants l = 16 * half .. + 16 of the four runs of 32 in this half of the block.
            for half in 0..2 {
                let runs = |x: &BlockQ6K| {
                    let ql = x.ql.as_ptr().add(64 * h + 16 * half);
                    let hb = vld1q_u8(x.qh.as_ptr().add(32 * h + 16 * half));
                    let (l0, l1) = (vld1q_u8(ql), vld1q_u8(ql.add(32)));
                    let q6 = |low: uint8x16_t, shifted_hi: uint8x16_t| {
                        let v = vorrq_u8(low, vandq_u8(shifted_hi, m2));
                        vsubq_s8(vreinterpretq_s8_u8(v), off)
                    };
                    [
                        q6(vandq_u8(l0, m4), vshlq_n_u8(hb, 4)),
                        q6(vandq_u8(l1, m4), vshlq_n_u8(hb, 2)),
                        q6(vshrq_n_u8(l0, 4), hb),
                        q6(vshrq_n_u8(l1, 4), vshrq_n_u8(hb, 2)),
                    ]
                };
                let (r0, r1) = (runs(x0), runs(x1));
                for run in 0..4 {
                    let wz = zip8(r0[run], r1[run]);
                    let s = 8 * h + 2 * run + half;
                    let scale = per_row_i32(x0.scales[s] as i32, x1.scales[s] as i32);
                    let at = 128 * h + 32 * run + 16 * half;
                    for p in 0..T / 2 {
                        let (ya, yb) = (&a[2 * p][b], &a[2 * p + 1][b]);
                        let sums = tile_dot(&wz, ya.qs.as_ptr().add(at), yb.qs.as_ptr().add(at));
                        isum[p] = vmlaq_s32(isum[p], sums, scale);
                    }
                }
            }
        }
        let dw = per_row(x0.d.to_f32(), x1.d.to_f32());
        for p in 0..T / 2 {
            let da = per_token(a[2 * p][b].d, a[2 * p + 1][b].d);
            let v = vmulq_f32(vmulq_f32(dw, da), vcvtq_f32_s32(isum[p]));
            acc[p] = vaddq_f32(acc[p], v);
        }
    }
    unzip_tiles(&acc)
}
