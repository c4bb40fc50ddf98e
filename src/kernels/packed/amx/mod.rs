//! AMX-INT8 tile kernels for prompt batches over the 8-row layouts: 16 rows (two groups) × 16
//! or 32 tokens per step. One `tdpbssd` multiplies a 16-token × 64-byte tile of activations by
//! a 64-byte × 16-row tile of weights: 16,384 multiply-adds, where `vpdpbusd` does 64.
//!
//! Two drivers: [`kquant`] for the K-quants (weights unpacked to `scale · q` and split into
//! two byte tiles), [`blocks32`] for the 32-quant layouts (signed bytes already). Each
//! layout's unpacking lives with its type (`types/<type>/x8/amx.rs`). Every result is bit for
//! bit the AVX-512 vector kernels' (same integer sums, same f32 steps).
//!
//! # Safety
//! Every `unsafe fn` here requires the AMX path (AMX-INT8 granted, with AVX-512).

pub mod blocks32;
pub mod kquant;

use std::arch::asm;
use std::cell::RefCell;

use super::PAIR;

pub(crate) use super::TILE_TOKENS;
/// Bytes of one full tile (16 rows × 64 bytes).
pub(crate) const TILE: usize = 1024;
/// Unpacked weight panels kept per pass over the tokens: they stay in L2 (2 MiB per core
/// here) beside the activations of the 32 tokens in flight.
pub(crate) const PANEL_BUDGET: usize = 768 * 1024;

/// `ldtilecfg`'s 64-byte operand (palette 1).
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

/// 64 bytes, so a `Vec` of them is cache-line aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Line64(pub [u8; 64]);

thread_local! {
    /// Per thread: unpacked weight panels, then the f32 accumulators.
    pub static SCRATCH: RefCell<(Vec<Line64>, Vec<[f32; PAIR]>)> = const {
        RefCell::new((Vec::new(), Vec::new()))
    };
}

/// The tile configuration of this thread; dropping it releases the tiles.
pub struct Tiles;

impl Tiles {
    /// `tmm0..4` sums (16 × 16 i32), `tmm4`/`tmm5` activations (16 tokens × `a_bytes`),
    /// `tmm6`/`tmm7` weights (`a_bytes / 4` rows × 16 rows' 4 bytes).
    ///
    /// # Safety
    /// the AMX path (`CpuPath::Amx`); `a_bytes` a multiple of 4 up to 64.
    pub unsafe fn configure(a_bytes: u16) -> Tiles {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let (k4, a) = ((a_bytes / 4) as u8, a_bytes);
            let cfg = TileConfig {
                palette: 1,
                start_row: 0,
                reserved: [0; 14],
                colsb: [64, 64, 64, 64, a, a, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0],
                rows: [16, 16, 16, 16, 16, 16, k4, k4, 0, 0, 0, 0, 0, 0, 0, 0],
            };
            asm!("ldtilecfg [{}]", in(reg) &cfg, options(nostack, readonly));
            Tiles
        }
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: only built by `configure`, so the CPU has AMX.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }
}
