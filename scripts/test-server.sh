#!/usr/bin/env bash
# The HTTP server end to end: `kolibri serve` driven by the official `openai` Python package
# (tests/server/test_openai.py: chat and completions with and without streaming, structured
# output checked by jsonschema, models, 401,
# 400s, 413, 404/405, 429, cancellation, metrics, a 16 x 20 load test with an RSS check).
# Prints "server: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
models=$(python3 scripts/fetch-models.py --path qwen2.5-coder-0.5b gemma-3-270m)
qwen=$(echo "$models" | sed -n 1p)
gemma=$(echo "$models" | sed -n 2p)
cargo build --release --bin kolibri
# The client library, unmodified from PyPI, installed beside the build (no virtualenv needed).
deps=target/pydeps
if ! PYTHONPATH=$deps python3 -c "import openai, jsonschema, ollama" 2>/dev/null; then
    python3 -m pip install -q --disable-pip-version-check --target "$deps" "openai==3.57.0" \
        "jsonschema==4.26.0" "ollama==0.6.1"
fi
PYTHONPATH=$deps python3 tests/server/test_openai.py target/release/kolibri "$qwen" "$gemma"
