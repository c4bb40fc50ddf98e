#!/usr/bin/env bash
# aarch64 (Raspberry Pi 5, ARM servers): cross-builds the crate's tests that need no
# downloaded model (unit tests, kernels vs scalar twins, dequantization fixtures, the tiny
# model end to end and quantized into every file type, sampling, GGUF robustness) and runs
# them under qemu-user for three CPUs:
# cortex-a76 (the Pi 5: dotprod, no i8mm), max (dotprod and i8mm) and cortex-a72 (no dotprod:
# the plain NEON path). Every available kernel path is checked against the scalar kernels.
# qemu measures nothing about speed. Needs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user-static.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-unknown-linux-gnu
if ! rustup target add "$target" >/dev/null 2>&1; then
  echo "aarch64: cannot add the $target target; skipped"
  exit 0
fi
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# Everything but the command line's download client (its TLS library is the host's business).
tests=(--no-default-features --features server,grammar,cli
  --lib --test kernels --test quant_fixtures --test tiny_model --test quantized_types --test sampling --test gguf_robustness)
cargo test --release --target "$target" "${tests[@]}" --no-run 2>&1 | tail -n 1
for cpu in cortex-a76 max cortex-a72; do
  echo "== aarch64 under qemu -cpu $cpu"
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -cpu $cpu -L /usr/aarch64-linux-gnu" \
    cargo test --release --target "$target" "${tests[@]}" -- --test-threads=2 2>&1 |
    grep -E '^test result:|FAILED|panicked' | sed "s/$/ [qemu $cpu]/"
done
