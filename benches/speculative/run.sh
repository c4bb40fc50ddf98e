#!/usr/bin/env bash
# Speculative decoding beside llama.cpp's llama-speculative and llama-lookup: 256 greedy tokens
# on a code-writing and an edit prompt. Usage: run.sh KOLIBRI LLAMA_BIN_DIR MODEL_DIR THREADS
# (LLAMA_BIN_DIR empty: Kolibri only).
set -u
K=$1 L=$2 M=$3 T=${4:-2}
here=$(dirname "$0")
target=$M/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
draft=$M/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
tps() { grep -oE "$1" | grep -oE '[0-9.]+ tokens/s|speed: +[0-9.]+' | grep -oE '[0-9.]+' | tail -1; }
for p in write edit; do
  prompt=$(cat "$here/$p.txt")
  for mode in plain lookup draft draft+lookup; do
    case $mode in
      plain) opt=();; lookup) opt=(--lookup);; draft) opt=(--draft "$draft");;
      draft+lookup) opt=(--draft "$draft" --lookup);;
    esac
    r=$("$K" run -m "$target" -p "$prompt" -n 256 --temp 0 -t "$T" "${opt[@]}" 2>&1 >/dev/null)
    echo "$p kolibri $mode: $(echo "$r" | tps 'generation:.*') t/s | $(echo "$r" | grep speculation)"
  done
  [ -z "$L" ] && continue
  r=$("$L/llama-speculative" -m "$target" -md "$draft" -p "$prompt" -n 256 --temp 0 -t "$T" -td "$T" -c 2048 2>&1)
  echo "$p llama.cpp speculative: $(echo "$r" | grep -E 'decoded .* speed' | tail -1) $(echo "$r" | grep -E ' accept +=' | tail -1)"
  r=$("$L/llama-lookup" -m "$target" -p "$prompt" -n 256 --temp 0 -t "$T" -c 2048 2>&1)
  echo "$p llama.cpp lookup: $(echo "$r" | grep -E 'decoded .* speed' | tail -1)"
done
