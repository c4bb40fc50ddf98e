#!/usr/bin/env bash
# The HTTP server end to end: `kolibri serve` driven by the official `openai` Python package
# (tests/server/test_openai.py: chat and completions with and without streaming, structured
# output checked by jsonschema, tool calls, logprobs, embeddings, the ollama package on /api,
# langchain-openai's structured output and tools, the chat page in headless Chromium
# (screenshot in target/artifacts/chat-page.png), models, 401,
# 400s, 413, 404/405, 429, cancellation, metrics, a 16 x 20 load test with an RSS check,
# speculation with --lookup and --draft).
# Prints "server: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
models=$(python3 scripts/fetch-models.py --path qwen2.5-coder-0.5b gemma-3-270m qwen2.5-coder-1.5b)
qwen=$(echo "$models" | sed -n 1p)
gemma=$(echo "$models" | sed -n 2p)
qwen_large=$(echo "$models" | sed -n 3p)
cargo build --release --bin kolibri
# The client library, unmodified from PyPI, installed beside the build (no virtualenv needed).
deps=target/pydeps
if ! PYTHONPATH=$deps python3 -c "import openai, jsonschema, ollama" 2>/dev/null; then
    python3 -m pip install -q --disable-pip-version-check --target "$deps" "openai==3.57.0" \
        "jsonschema==4.26.0" "ollama==0.6.1"
fi
# langchain-openai pins an older openai: a folder of its own, used by its check's process.
langchain=target/pydeps-langchain
if ! PYTHONPATH=$langchain python3 -c "import langchain_openai" 2>/dev/null; then
    python3 -m pip install -q --disable-pip-version-check --target "$langchain" \
        "langchain-openai==1.1.10"
fi
export KOLIBRI_LANGCHAIN_PATH="$PWD/$langchain"
# The chat page's test: playwright-core from npm drives Debian's Chromium (no browser download).
web=target/web
if [ ! -d "$web/node_modules/playwright-core" ]; then
    mkdir -p "$web"
    (cd "$web" && npm install --silent --no-audit --no-fund playwright-core@1.57.0)
fi
export KOLIBRI_NODE_PATH="$PWD/$web/node_modules"
status=0
PYTHONPATH=$deps python3 tests/server/test_openai.py target/release/kolibri "$qwen" "$gemma" "$qwen_large" ||
  status=1
# Three replicas behind nginx (deploy/nginx/kolibri-replicas.conf): affinity, failover.
PYTHONPATH=$deps python3 tests/server/test_replicas.py target/release/kolibri "$qwen" || status=1
exit $status
