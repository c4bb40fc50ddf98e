//! aarch64 NEON dot kernels, in two builds of the same code: [`base`] for every armv8-a core
//! (products widened with `smull` and pairwise-added) and [`dotprod`] for armv8.2-a cores
//! with the dot-product extension (Raspberry Pi 5's Cortex-A76, Apple M, Graviton 2+), where
//! one `sdot` does 16 products. Stable Rust has no `sdot` intrinsic, so it is one `asm!`
//! instruction in a function compiled for the extension.
//!
//! Per block, the integer sums are exactly those of [`super::scalar`]'s kernels, and the f32
//! scaling happens in the same order, so results match the scalar twins bit for bit.
//!
//! # Safety
//! Every `pub unsafe fn` requires NEON ([`base`]) or NEON with dotprod ([`dotprod`],
//! [`dotprod_detected`]), equal weight and activation block counts (only the shorter is
//! read), and activations from the crate's quantizers (|q| <= 127: the widening `base` path
//! sums two products in an i16).

use std::arch::aarch64::*;

/// Whether the CPU has the dot-product extension (`sdot`).
pub fn dotprod_detected() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

/// `acc[i] += sum(a[4i..4i+4] * b[4i..4i+4])` with one `sdot`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn dot4_sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: a register-only instruction of the extension this function is compiled for.
    unsafe {
        std::arch::asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// [`dot4_sdot`] without the extension: widening products, pairs added in i16 (|sum| <=
/// 2 * 128 * 127), then pairs of pairs into the lanes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot4_widen(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    let hi = vmull_high_s8(a, b);
    vpadalq_s16(acc, vpaddq_s16(lo, hi))
}

/// The 32 fifth bits of a Q5_0 block as bytes `0x10` (set) or 0, in quant order.
#[inline]
#[target_feature(enable = "neon")]
pub(super) unsafe fn q5_high_bits(qh: &[u8; 4]) -> (uint8x16_t, uint8x16_t) {
    let h = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes(*qh)));
    // Lane j of the low half tests bit j % 8 of byte j / 8; the high half bytes 2 and 3.
    const IDX_LO: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const IDX_HI: [u8; 16] = [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3];
    const BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let bit = vld1q_u8(BIT.as_ptr());
    let pick = |idx: &[u8; 16]| {
        let bytes = vqtbl1q_u8(h, vld1q_u8(idx.as_ptr()));
        vandq_u8(vtstq_u8(bytes, bit), vdupq_n_u8(0x10))
    };
    (pick(&IDX_LO), pick(&IDX_HI))
}

/// The NEON dot kernels built around one 4-wide dot instruction.
macro_rules! neon_dot_kernels {
    ($(#[$doc:meta])* $module:ident, $features:literal, $dot4:ident) => {
        $(#[$doc])*
        pub mod $module {
            use std::arch::aarch64::*;

            use super::{q5_high_bits, $dot4};
            use crate::kernels::scalar::unpack_k4_scales;
            use crate::quant::blocks::*;

            /// Sum of the 32 products of two 32-quant halves.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn dot32(w: (int8x16_t, int8x16_t), a: &[i8; 32]) -> i32 {
                let acc = $dot4(vdupq_n_s32(0), w.0, vld1q_s8(a.as_ptr()));
                vaddvq_s32($dot4(acc, w.1, vld1q_s8(a.as_ptr().add(16))))
            }

            /// Q4_0 weights × Q8_0 activations.
            ///
            /// # Safety
            /// See the module docs.
            #[target_feature(enable = $features)]
            pub unsafe fn vec_dot_q4_0_q8_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
                let (m4, off) = (vdupq_n_u8(15), vdupq_n_s8(8));
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let q = vld1q_u8(x.qs.as_ptr());
                    let lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), off);
                    let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), off);
                    let sumi = dot32((lo, hi), &y.qs);
                    sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
                }
                sum
            }

            /// Q5_0 weights × Q8_0 activations.
            ///
            /// # Safety
            /// See the module docs.
            #[target_feature(enable = $features)]
            pub unsafe fn vec_dot_q5_0_q8_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
                let (m4, off) = (vdupq_n_u8(15), vdupq_n_s8(16));
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let q = vld1q_u8(x.qs.as_ptr());
                    let (h0, h1) = q5_high_bits(&x.qh);
                    let lo = vorrq_u8(vandq_u8(q, m4), h0);
                    let hi = vorrq_u8(vshrq_n_u8(q, 4), h1);
                    let lo = vsubq_s8(vreinterpretq_s8_u8(lo), off);
                    let hi = vsubq_s8(vreinterpretq_s8_u8(hi), off);
                    let sumi = dot32((lo, hi), &y.qs);
                    sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
                }
                sum
            }

            /// Q8_0 weights × Q8_0 activations.
            ///
            /// # Safety
            /// See the module docs.
            #[target_feature(enable = $features)]
            pub unsafe fn vec_dot_q8_0_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let q = (vld1q_s8(x.qs.as_ptr()), vld1q_s8(x.qs.as_ptr().add(16)));
                    let sumi = dot32(q, &y.qs);
                    sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
                }
                sum
            }

            /// Q4_K weights × Q8_K activations.
            ///
            /// # Safety
            /// See the module docs.
            #[target_feature(enable = $features)]
            pub unsafe fn vec_dot_q4_k_q8_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
                let m4 = vdupq_n_u8(15);
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let (sc, m) = unpack_k4_scales(&x.scales);
                    let mut isum = 0i32;
                    for j in 0..4 {
                        let q = x.qs.as_ptr().add(32 * j);
                        let (q0, q1) = (vld1q_u8(q), vld1q_u8(q.add(16)));
                        let nib = |v: uint8x16_t| vreinterpretq_s8_u8(vandq_u8(v, m4));
                        let top = |v: uint8x16_t| vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                        let a = y.qs.as_ptr().add(64 * j) as *const [i8; 32];
                        let lo = dot32((nib(q0), nib(q1)), &*a);
                        let hi = dot32((top(q0), top(q1)), &*a.add(1));
                        isum += sc[2 * j] as i32 * lo + sc[2 * j + 1] as i32 * hi;
                    }
                    let summ: i32 = (0..16).map(|j| y.bsums[j] as i32 * m[j / 2] as i32).sum();
                    sum += x.d.to_f32() * y.d * isum as f32 - x.dmin.to_f32() * y.d * summ as f32;
                }
                sum
            }

            /// Q6_K weights × Q8_K activations.
            ///
            /// # Safety
            /// See the module docs.
            #[target_feature(enable = $features)]
            pub unsafe fn vec_dot_q6_k_q8_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
                let (m4, m2, off) = (vdupq_n_u8(15), vdupq_n_u8(0x30), vdupq_n_s8(32));
                let mut sum = 0f32;
                for (x, y) in w.iter().zip(a) {
                    let mut isum = 0i32;
                    for h in 0..2 {
                        let ql = x.ql.as_ptr().add(64 * h);
                        let qh = x.qh.as_ptr().add(32 * h);
                        let q8 = y.qs.as_ptr().add(128 * h);
                        // 16 lanes at a time: l = 0..16 and 16..32 of the four runs of 32.
                        for half in 0..2 {
                            let l0 = vld1q_u8(ql.add(16 * half));
                            let l1 = vld1q_u8(ql.add(32 + 16 * half));
                            let hb = vld1q_u8(qh.add(16 * half));
                            let q6 = |low: uint8x16_t, shift_hi: uint8x16_t| {
                                let v = vorrq_u8(low, vandq_u8(shift_hi, m2));
                                vsubq_s8(vreinterpretq_s8_u8(v), off)
                            };
                            let runs = [
                                q6(vandq_u8(l0, m4), vshlq_n_u8(hb, 4)),
                                q6(vandq_u8(l1, m4), vshlq_n_u8(hb, 2)),
                                q6(vshrq_n_u8(l0, 4), hb),
                                q6(vshrq_n_u8(l1, 4), vshrq_n_u8(hb, 2)),
                            ];
                            for (run, q) in runs.into_iter().enumerate() {
                                let a = vld1q_s8(q8.add(32 * run + 16 * half));
                                let s = vaddvq_s32($dot4(vdupq_n_s32(0), q, a));
                                isum += x.scales[8 * h + 2 * run + half] as i32 * s;
                            }
                        }
                    }
                    sum += x.d.to_f32() * y.d * isum as f32;
                }
                sum
            }
        }
    };
}

neon_dot_kernels!(
    /// Kernels for every armv8-a core.
    base,
    "neon",
    dot4_widen
);
neon_dot_kernels!(
    /// Kernels for cores with the dot-product extension.
    dotprod,
    "neon,dotprod",
    dot4_sdot
);

/// `[h0, h1, h2, h3]` f16 bits widened to f32 (`fcvtl`, base armv8: stable Rust's f16 vector
/// types and conversions are not available, so it is one `asm!` instruction).
#[inline]
#[target_feature(enable = "neon")]
pub(super) unsafe fn f16x4_to_f32(h: uint16x4_t) -> float32x4_t {
    let out: float32x4_t;
    // SAFETY: a register-only base NEON instruction.
    unsafe {
        std::arch::asm!(
            "fcvtl {o:v}.4s, {i:v}.4h",
            o = lateout(vreg) out,
            i = in(vreg) h,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// bf16 bits widened to f32 (the bits shifted into the high half).
#[inline]
#[target_feature(enable = "neon")]
pub(super) unsafe fn bf16x4_to_f32(h: uint16x4_t) -> float32x4_t {
    vreinterpretq_f32_u32(vshll_n_u16::<16>(h))
}

/// The float dot kernels: 16 products per step in four f32 FMA chains, then the tail. Their
/// sums are ordered differently from the scalar twins' f64 sums, so they match within f32
/// rounding (tested), like the AVX2 ones.
macro_rules! neon_float_dot {
    ($(#[$doc:meta])* $name:ident, $T:ty, |$p:ident| $load4:expr, $to_f32:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// NEON (every aarch64 core).
        #[target_feature(enable = "neon")]
        pub unsafe fn $name(w: &[$T], a: &[$T]) -> f32 {
            let n = w.len().min(a.len());
            let load = |$p: *const $T| -> float32x4_t { $load4 };
            let (pw, pa) = (w.as_ptr(), a.as_ptr());
            let mut acc = [vdupq_n_f32(0.0); 4];
            let mut i = 0;
            while i + 16 <= n {
                for (k, s) in acc.iter_mut().enumerate() {
                    let o = i + 4 * k;
                    *s = vfmaq_f32(*s, load(pw.add(o)), load(pa.add(o)));
                }
                i += 16;
            }
            while i + 4 <= n {
                acc[0] = vfmaq_f32(acc[0], load(pw.add(i)), load(pa.add(i)));
                i += 4;
            }
            let s = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
            let mut sum = vaddvq_f32(s);
            let to_f32: fn($T) -> f32 = $to_f32;
            for j in i..n {
                sum += to_f32(w[j]) * to_f32(a[j]);
            }
            sum
        }
    };
}

neon_float_dot!(
    /// F16 weights × F16 activations.
    vec_dot_f16_f16,
    half::f16,
    |p| f16x4_to_f32(vld1_u16(p as *const u16)),
    |x| x.to_f32()
);
neon_float_dot!(
    /// BF16 weights × BF16 activations.
    vec_dot_bf16_bf16,
    half::bf16,
    |p| bf16x4_to_f32(vld1_u16(p as *const u16)),
    |x| x.to_f32()
);
neon_float_dot!(
    /// F32 × F32.
    vec_dot_f32_f32,
    f32,
    |p| vld1q_f32(p),
    |x| x
);
