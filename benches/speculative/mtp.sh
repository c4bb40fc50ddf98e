#!/usr/bin/env bash
# Drafting with a model's own drafter beside llama.cpp's llama-speculative-simple --spec-type
# draft-mtp, on an agreeing synthetic pair (its drafter drafts right 9 times in 10), at 1 and 2
# threads (or THREADS, comma-separated): plain and speculative tokens/s of both engines, 64
# greedy tokens. DRAFTER mtp (default): a 1.6B Qwen3.5 and its multi-token-prediction block;
# assistant: a 1.1B Gemma 4 and its assistant (4 layers of 512).
#   benches/speculative/mtp.sh KOLIBRI LLAMA_BIN_DIR [THREADS] [DRAFTER]
#   (LLAMA_BIN_DIR empty: Kolibri only)
# The models are built once (F16) and quantized to Q4_K_M beside them.
set -u
K=$1 L=$2 T=${3:-1,2} DRAFTER=${4:-mtp}
root=$(cd "$(dirname "$0")/../.." && pwd)
quantized() { # the Q4_K_M copy of synthetic model $1
  local f16
  f16=$(python3 "$root/scripts/make-synthetic-models.py" --path "$1") || exit 1
  local q=${f16%.gguf}-q4_k_m.gguf
  [ -f "$q" ] || "$K" quantize "$f16" "$q" Q4_K_M >/dev/null 2>&1 || exit 1
  echo "$q"
}
case $DRAFTER in
  mtp)
    model=$(quantized qwen35-mtp-agree-bench)
    ours=(--spec mtp) theirs=() ;;
  assistant)
    model=$(quantized gemma4-agree-bench) assistant=$(quantized gemma4-assistant-agree-bench)
    ours=(--draft-assistant "$assistant") theirs=(-md "$assistant") ;;
  *) echo "DRAFTER is mtp or assistant" >&2; exit 2 ;;
esac
prompt="Once upon a time, in a small village at the edge of the forest, there lived"
tps() { grep -oE 'generation:.*' | grep -oE '[0-9.]+ tokens/s' | grep -oE '[0-9.]+'; }
for t in ${T//,/ }; do
  plain=$("$K" run -m "$model" -p "$prompt" -n 64 --temp 0 -t "$t" 2>&1 >/dev/null | tps)
  r=$("$K" run -m "$model" -p "$prompt" -n 64 --temp 0 -t "$t" "${ours[@]}" 2>&1 >/dev/null)
  echo "threads $t kolibri: plain $plain t/s, $DRAFTER $(echo "$r" | tps) t/s | $(echo "$r" | grep speculation)"
  [ -z "$L" ] && continue
  r=$(LD_LIBRARY_PATH=$L "$L/llama-bench" -m "$model" -p 0 -n 64 -t "$t" -r 2 2>&1 | grep tg64)
  echo "threads $t llama.cpp: plain $(echo "$r" | grep -oE '[0-9.]+ ± [0-9.]+') t/s"
  r=$(LD_LIBRARY_PATH=$L "$L/llama-speculative-simple" -m "$model" "${theirs[@]}" -p "$prompt" \
      -n 64 --temp 0 -t "$t" --spec-type draft-mtp --spec-draft-n-max 4 2>&1)
  echo "threads $t llama.cpp: $DRAFTER $(echo "$r" | grep -E 'decoded .* speed' | tail -1) $(echo "$r" | grep -E 'accept +=' | tail -1)"
done
