#!/usr/bin/env bash
# The main job on a fresh machine: fetch the default model if missing, build, generate text
# and print the speed. Extra arguments go to `kolibri run` (e.g. -p "your prompt" -n 64).
set -euo pipefail
cd "$(dirname "$0")/.."
model=$(python3 scripts/fetch-models.py --path qwen2.5-coder-0.5b)
cargo build --release --bin kolibri
prompt="Write a Python function that checks whether a number is prime."
exec target/release/kolibri run -m "$model" -p "$prompt" -n 128 --temp 0 "$@"
