//! aarch64 NEON helpers shared by several weight types' kernels: the 4-wide dot instruction
//! in its two builds (`smull` widening on every armv8-a core, one `sdot` with the dot-product
//! extension), and f16/bf16 widening.
//!
//! # Safety
//! Every `unsafe fn` here requires NEON (and `dot4_sdot` the dot-product extension).

use std::arch::aarch64::*;

/// `acc[i] += sum(a[4i..4i+4] * b[4i..4i+4])` with one `sdot`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn dot4_sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
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
pub unsafe fn dot4_widen(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    let hi = vmull_high_s8(a, b);
    vpadalq_s16(acc, vpaddq_s16(lo, hi))
}

/// The 32 fifth bits of a Q5_0 block as bytes `0x10` (set) or 0, in quant order.
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn q5_high_bits(qh: &[u8; 4]) -> (uint8x16_t, uint8x16_t) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
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
}

/// types and conversions are not available, so it is one `asm!` instruction).
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn f16x4_to_f32(h: uint16x4_t) -> float32x4_t {
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
pub unsafe fn bf16x4_to_f32(h: uint16x4_t) -> float32x4_t {
    vreinterpretq_f32_u32(vshll_n_u16::<16>(h))
}

/// Sum of the 32 products of two 32-quant halves, in both builds.
pub mod base {
    use std::arch::aarch64::*;

    /// # Safety
    /// NEON.
    #[inline]
    #[target_feature(enable = "neon")]
    pub unsafe fn dot32(w: (int8x16_t, int8x16_t), a: &[i8; 32]) -> i32 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let acc = super::dot4_widen(vdupq_n_s32(0), w.0, vld1q_s8(a.as_ptr()));
            vaddvq_s32(super::dot4_widen(acc, w.1, vld1q_s8(a.as_ptr().add(16))))
        }
    }
}

/// [`base::dot32`] with `sdot`.
pub mod dotprod {
    use std::arch::aarch64::*;

    /// # Safety
    /// NEON with the dot-product extension.
    #[inline]
    #[target_feature(enable = "neon,dotprod")]
    pub unsafe fn dot32(w: (int8x16_t, int8x16_t), a: &[i8; 32]) -> i32 {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let acc = super::dot4_sdot(vdupq_n_s32(0), w.0, vld1q_s8(a.as_ptr()));
            vaddvq_s32(super::dot4_sdot(acc, w.1, vld1q_s8(a.as_ptr().add(16))))
        }
    }
}

/// Builds each function twice from the same code: in module `$base` for every armv8-a core,
/// with `$dot4` = [`dot4_widen`] and `$dot32` = [`base::dot32`]; in `$dotprod` for cores with
/// the dot-product extension, with [`dot4_sdot`] and [`dotprod::dot32`]. The integer sums are
/// the same either way.
macro_rules! two_builds {
    ($(#[$doc:meta])* $base:ident, $dotprod:ident, |$dot4:ident, $dot32:ident| { $($body:item)* }) => {
        $(#[$doc])*
        pub mod $base {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use $crate::kernels::simd::neon::{base::dot32 as $dot32, dot4_widen as $dot4};
            $( #[target_feature(enable = "neon")] $body )*
        }
        $(#[$doc])*
        pub mod $dotprod {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use $crate::kernels::simd::neon::{dotprod::dot32 as $dot32, dot4_sdot as $dot4};
            $( #[target_feature(enable = "neon,dotprod")] $body )*
        }
    };
}
pub(crate) use two_builds;
