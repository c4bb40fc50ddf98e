#!/usr/bin/env bash
# Every test: formatting, lints, unit/property tests, and the model-level suites against
# llama.cpp's reference outputs (release profile). Fetches the three real models if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/fetch-models.py all
cargo fmt --all -- --check
cargo clippy --release --all-targets -- -D warnings
cargo test --release -- --test-threads=1
