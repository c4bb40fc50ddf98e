#!/usr/bin/env bash
# Every test: formatting, lints, unit/property tests, and the model-level suites against
# llama.cpp's reference outputs (release profile). Fetches the three real models if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/fetch-models.py all
cargo fmt --all -- --check
cargo clippy --release --all-targets -- -D warnings
# Model-level tests use every core each, so they run one at a time.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --release --all-targets -- --test-threads=1 2>&1 | tee "$log"
# One closing line over all test binaries.
awk '/^test result:/ { p += $4; f += $6 } END { printf "all suites: %d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$log"
