#!/usr/bin/env bash
# Drafting with a model's own multi-token-prediction block beside llama.cpp's
# llama-speculative-simple --spec-type draft-mtp, on the agreeing synthetic pair (a 1.6B Qwen3.5
# whose block drafts right 9 times in 10), at 1 and 2 threads (or THREADS, comma-separated):
# plain and MTP tokens/s of both engines, 64 greedy tokens.
#   benches/speculative/mtp.sh KOLIBRI LLAMA_BIN_DIR [THREADS]   (LLAMA_BIN_DIR empty: Kolibri only)
# The model is built once (F16, 3 GB) and quantized to Q4_K_M beside it.
set -u
K=$1 L=$2 T=${3:-1,2}
root=$(cd "$(dirname "$0")/../.." && pwd)
f16=$(python3 "$root/scripts/make-synthetic-models.py" --path qwen35-mtp-agree-bench) || exit 1
model=${f16%.gguf}-q4_k_m.gguf
[ -f "$model" ] || "$K" quantize "$f16" "$model" Q4_K_M >/dev/null 2>&1 || exit 1
prompt="Once upon a time, in a small village at the edge of the forest, there lived"
tps() { grep -oE 'generation:.*' | grep -oE '[0-9.]+ tokens/s' | grep -oE '[0-9.]+'; }
for t in ${T//,/ }; do
  plain=$("$K" run -m "$model" -p "$prompt" -n 64 --temp 0 -t "$t" 2>&1 >/dev/null | tps)
  r=$("$K" run -m "$model" -p "$prompt" -n 64 --temp 0 -t "$t" --spec mtp 2>&1 >/dev/null)
  echo "threads $t kolibri: plain $plain t/s, mtp $(echo "$r" | tps) t/s | $(echo "$r" | grep speculation)"
  [ -z "$L" ] && continue
  r=$(LD_LIBRARY_PATH=$L "$L/llama-bench" -m "$model" -p 0 -n 64 -t "$t" -r 2 2>&1 | grep tg64)
  echo "threads $t llama.cpp: plain $(echo "$r" | grep -oE '[0-9.]+ ± [0-9.]+') t/s"
  r=$(LD_LIBRARY_PATH=$L "$L/llama-speculative-simple" -m "$model" -p "$prompt" -n 64 --temp 0 \
      -t "$t" --spec-type draft-mtp --spec-draft-n-max 4 2>&1)
  echo "threads $t llama.cpp: mtp $(echo "$r" | grep -E 'decoded .* speed' | tail -1) $(echo "$r" | grep -E 'accept +=' | tail -1)"
done
