#!/usr/bin/env python3
"""Generate bit-exact dequantization fixtures for `tests/quant_fixtures.rs`.

Reference: gguf-py (`pip install gguf`), version 0.19.0, with numpy 2.4.6;
outputs come from `gguf.quants.dequantize(data, GGMLQuantizationType.X)`.

For each supported type we build a few blocks of random bytes (fixed seed), then overwrite the
f16 scale fields (d, m, dmin) with finite values: random finite f16 bit patterns of both signs,
plus extremes (+-65504, subnormals, +-0.0, smallest normal). No NaN/Inf is ever produced, so the
outputs are finite and deterministic. For F32/F16/BF16 the "blocks" are single elements with
random finite bit patterns plus the same kind of extremes.

File layout, `tests/data/quant/<TYPE>.bin`, all little-endian:
    u32 ggml type id
    u32 n_blocks
    n_blocks * type_size bytes    raw blocks, exactly as stored in GGUF
    n_blocks * block_size f32     gguf-py's dequantized values

Quantizer fixtures, `tests/data/quant/quantize-<TYPE>.bin`:
    u32 ggml type id
    u32 n_elements
    n_elements f32                inputs (random weights, a zero block, a constant block)
    n_elements / block_size * type_size bytes   gguf-py's `quantize(inputs, TYPE)`

Usage: python3 scripts/gen_quant_fixtures.py   (run from the repository root)
"""

import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

SEED = 0x6B6F6C69  # "koli"
OUT_DIR = os.path.join("tests", "data", "quant")

# Byte offsets of the f16 scale fields inside one block (ggml's struct layouts).
SCALE_OFFSETS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.IQ4_NL: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
    T.IQ4_XS: [0],
}

# Types gguf-py quantizes (with ggml's reference rounding); `quantize-<TYPE>.bin` holds
# f32 inputs and gguf-py's blocks for them.
QUANTIZED_BY_GGUF_PY = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4]
N_QUANTIZE_BLOCKS = 64

# Element counts for the plain float types, and block counts for the quantized ones.
N_FLOAT_ELEMS = 256
N_BLOCKS_SMALL = 16  # 32-element blocks
N_BLOCKS_K = 8  # 256-element super-blocks

F16_EXTREMES = [
    0x7BFF,  # 65504
    0xFBFF,  # -65504
    0x0001,  # smallest subnormal
    0x8001,
    0x03FF,  # largest subnormal
    0x0400,  # smallest normal
    0x0000,  # +0.0
    0x8000,  # -0.0
    0x3C00,  # 1.0
    0xBC00,  # -1.0
]


def random_finite_f16_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    # Exponent all-ones is Inf/NaN: clear one exponent bit to make it finite.
    bad = (bits & 0x7C00) == 0x7C00
    bits[bad] &= np.uint16(0xFBFF)
    return bits


def scale_bits(rng: np.random.Generator, n_blocks: int, n_fields: int) -> np.ndarray:
    """(n_blocks, n_fields) f16 bit patterns: extremes in the first blocks, random afterwards."""
    bits = random_finite_f16_bits(rng, n_blocks * n_fields).reshape(n_blocks, n_fields)
    # Block 0: largest magnitudes of mixed sign; block 1: subnormals; block 2: signed zeros.
    if n_blocks > 3:
        bits[0] = [F16_EXTREMES[(f % 2)] for f in range(n_fields)]
        bits[1] = [F16_EXTREMES[2 + (f % 2)] if f == 0 else F16_EXTREMES[4] for f in range(n_fields)]
        bits[2] = [F16_EXTREMES[6 + ((f + 1) % 2)] for f in range(n_fields)]
        bits[3] = [F16_EXTREMES[5] if f == 0 else F16_EXTREMES[9] for f in range(n_fields)]
    return bits


def float_data(rng: np.random.Generator, qtype: T) -> np.ndarray:
    n = N_FLOAT_ELEMS
    if qtype == T.F32:
        bits = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
        bad = (bits & 0x7F800000) == 0x7F800000
        bits[bad] &= np.uint32(0xFF7FFFFF)
        extremes = [0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001, 0x00800000, 0, 0x80000000]
        bits[: len(extremes)] = extremes
        return bits.view(np.uint8)
    if qtype == T.F16:
        bits = random_finite_f16_bits(rng, n)
        bits[: len(F16_EXTREMES)] = F16_EXTREMES
        return bits.view(np.uint8)
    if qtype == T.BF16:
        bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
        bad = (bits & 0x7F80) == 0x7F80
        bits[bad] &= np.uint16(0xFF7F)
        extremes = [0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x0080, 0x0000, 0x8000]
        bits[: len(extremes)] = extremes
        return bits.view(np.uint8)
    raise ValueError(qtype)


def mxfp4_data(rng: np.random.Generator) -> np.ndarray:
    """MXFP4 blocks: random codes under every finite E8M0 half scale from the subnormal
    2^-128 (e = 0, 1) to 2^124 (e = 252: 12 * 2^125 would overflow f32)."""
    blocks = rng.integers(0, 256, size=(N_BLOCKS_SMALL, 17), dtype=np.uint16).astype(np.uint8)
    blocks[:, 0] = rng.integers(0, 253, size=N_BLOCKS_SMALL, dtype=np.uint16).astype(np.uint8)
    blocks[:4, 0] = [0, 1, 2, 252]
    return blocks.reshape(-1)


def quant_data(rng: np.random.Generator, qtype: T) -> np.ndarray:
    if qtype == T.MXFP4:
        return mxfp4_data(rng)
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    n_blocks = N_BLOCKS_K if block_size == 256 else N_BLOCKS_SMALL
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint16).astype(np.uint8)
    offsets = SCALE_OFFSETS[qtype]
    bits = scale_bits(rng, n_blocks, len(offsets))
    for f, off in enumerate(offsets):
        blocks[:, off : off + 2] = bits[:, f : f + 1].copy().view(np.uint8)
    return blocks.reshape(-1)


def main() -> int:
    rng = np.random.default_rng(SEED)
    os.makedirs(OUT_DIR, exist_ok=True)
    # New types go last, so the random streams of the earlier ones stay as they were.
    types = [T.F32, T.F16, T.BF16, *SCALE_OFFSETS.keys(), T.MXFP4]
    total = 0
    for qtype in types:
        data = float_data(rng, qtype) if qtype in (T.F32, T.F16, T.BF16) else quant_data(rng, qtype)
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        n_blocks = data.size // type_size
        out = np.asarray(dequantize(data, qtype), dtype=np.float32).reshape(-1)
        assert out.size == n_blocks * block_size, (qtype.name, out.size)
        assert np.isfinite(out).all(), qtype.name
        path = os.path.join(OUT_DIR, f"{qtype.name}.bin")
        with open(path, "wb") as f:
            f.write(struct.pack("<II", int(qtype), n_blocks))
            f.write(data.tobytes())
            f.write(out.astype("<f4").tobytes())
        size = os.path.getsize(path)
        total += size
        print(f"{path}: {n_blocks} blocks, {size} bytes")
    qrng = np.random.default_rng(SEED + 1)
    for qtype in QUANTIZED_BY_GGUF_PY:
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        x = (qrng.standard_normal(N_QUANTIZE_BLOCKS * block_size) * 0.05).astype(np.float32)
        x[:block_size] = 0.0
        x[block_size : 2 * block_size] = 0.75
        x[2 * block_size : 3 * block_size] *= 1000.0
        q = np.asarray(quantize(x.reshape(-1, block_size), qtype), dtype=np.uint8).reshape(-1)
        assert q.size == N_QUANTIZE_BLOCKS * type_size, (qtype.name, q.size)
        path = os.path.join(OUT_DIR, f"quantize-{qtype.name}.bin")
        with open(path, "wb") as f:
            f.write(struct.pack("<II", int(qtype), x.size))
            f.write(x.astype("<f4").tobytes())
            f.write(q.tobytes())
        total += os.path.getsize(path)
        print(f"{path}: {x.size} elements")
    print(f"total {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
