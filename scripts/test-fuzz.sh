#!/usr/bin/env bash
# Every cargo-fuzz target in fuzz/ for a short time (FUZZ_SECONDS each, default 12), from its
# committed seeds (fuzz/seeds/TARGET) and whatever corpus earlier runs left: a crash, a panic,
# an AddressSanitizer report, a leak or a timeout fails it. The long runs are done by hand
# (fuzz/README.md). cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP=1 allows them on stable.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-12}
# The targets that need a model get the small synthetic Qwen3 (its tokenizer and template are
# real; its weights are tiny, so a fuzzed request that generates still finishes quickly).
export KOLIBRI_FUZZ_MODEL=${KOLIBRI_FUZZ_MODEL:-$(ls "${KOLIBRI_MODEL_DIR:-$HOME/.cache/kolibri/models}"/synthetic/qwen3-tiny-v*.gguf | head -1)}
export RUSTC_BOOTSTRAP=1
if ! command -v cargo-fuzz >/dev/null; then
  cargo install cargo-fuzz --locked --quiet || { echo "fuzz: 0 passed, 1 failed (cargo-fuzz does not install)"; exit 1; }
fi
if ! cargo fuzz build --release 2>&1 | tail -3; then
  echo "fuzz: 0 passed, 1 failed (the targets do not build)"
  exit 1
fi
passed=0
failed=0
for target in $(cargo fuzz list); do
  mkdir -p "fuzz/corpus/$target"
  dirs=("fuzz/corpus/$target")
  [ -d "fuzz/seeds/$target" ] && dirs+=("fuzz/seeds/$target")
  log=$(mktemp)
  # Saved states on a hybrid model: KV rows, a recurrent state and its checkpoints.
  model=$KOLIBRI_FUZZ_MODEL
  if [ "$target" = saved_state ]; then
    model=$(ls "${KOLIBRI_MODEL_DIR:-$HOME/.cache/kolibri/models}"/synthetic/qwen35-tiny-v*.gguf | head -1)
  fi
  # Assistant drafters beside a Gemma 4 target (the mixture: its vocabulary is small).
  if [ "$target" = assistant_load ]; then
    model=$(ls "${KOLIBRI_MODEL_DIR:-$HOME/.cache/kolibri/models}"/synthetic/gemma4moe-tiny-v*.gguf | head -1)
  fi
  if KOLIBRI_FUZZ_MODEL=$model cargo fuzz run --release "$target" "${dirs[@]}" -- -max_total_time="$seconds" \
      -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    runs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | grep -o "[0-9]*$")
    echo "ok   - fuzz $target: ${runs:-?} inputs in ${seconds} s, no crash"
    passed=$((passed + 1))
  else
    echo "FAIL - fuzz $target:"
    grep -v "^#[0-9]" "$log" | tail -40
    failed=$((failed + 1))
  fi
  rm -f "$log"
done
echo "fuzz: $passed passed, $failed failed"
exit $((failed > 0))
