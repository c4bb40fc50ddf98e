#!/usr/bin/env bash
# The C ABI end to end, as a C/C++ host sees it (run by scripts/test.sh after the Rust suites):
# install into a temporary prefix; build the C/C++ examples against it with find_package
# (shared and static) and with pkg-config; generate text with the 0.5B model through each;
# run the misuse test; run the examples under valgrind and under ASan+UBSan; run the Go and
# C# bindings' tests (Go's concurrency tests also under -race); run tests/capi_threads.rs
# under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

models="${KOLIBRI_MODEL_DIR:-$HOME/.cache/kolibri/models}"
model="$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
plain_model="$models/gemma-3-270m-q4_k_m.gguf" # has no chat template
large_model="$models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
synthetic() { python3 scripts/make-synthetic-models.py --path "$1"; }
mtp_model="$(synthetic qwen35-mtp-tiny)"
mtp_agreeing="$(synthetic qwen35-mtp-agree-tiny)"
no_block="$(synthetic qwen35-tiny)"
gemma4="$(synthetic gemma4-tiny)"
assistant="$(synthetic gemma4-assistant-tiny)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
check() { # check NAME COMMAND...: runs it, records and reports the result (safe to run in &)
  local name="$1"; shift
  local log="$work/check-$(printf '%s' "$name" | tr -c 'a-zA-Z0-9' '_').log"
  if "$@" > "$log" 2>&1; then
    echo "ok   - $name" | tee -a "$work/results"
  else
    { echo "FAIL - $name"; tail -n 30 "$log" | sed 's/^/       /'; } | tee -a "$work/results"
  fi
}

echo "== install"
scripts/install.sh --prefix "$prefix" | tail -n 1

echo "== build the examples against the installed prefix"
check "cmake, shared library" sh -c "cmake -S c-examples -B '$work/shared' -DCMAKE_PREFIX_PATH='$prefix' -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build '$work/shared' -j 2"
check "cmake, static library" sh -c "cmake -S c-examples -B '$work/static' -DCMAKE_PREFIX_PATH='$prefix' -DKOLIBRI_USE_STATIC=ON && cmake --build '$work/static' -j 2"
check "cmake, ASan+UBSan" sh -c "cmake -S c-examples -B '$work/asan' -DCMAKE_PREFIX_PATH='$prefix' -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS='-fsanitize=address,undefined -fno-omit-frame-pointer' -DCMAKE_CXX_FLAGS='-fsanitize=address,undefined -fno-omit-frame-pointer' && cmake --build '$work/asan' -j 2"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
check "pkg-config, C11 and C++17" sh -c "cc -std=c11 -Wall -Wextra -Werror c-examples/simple.c \$(pkg-config --cflags --libs kolibri) -Wl,-rpath,'$prefix/lib' -o '$work/simple-pc' && c++ -std=c++17 -Wall -Wextra -Werror c-examples/chat.cpp \$(pkg-config --cflags --libs kolibri) -Wl,-rpath,'$prefix/lib' -o '$work/chat-pc'"
check "the C library links no HTTP stack (the server feature is off)" sh -c "! nm -C '$prefix/lib/libkolibri.a' 2>/dev/null | grep -qE 'tokio::|axum::|hyper::'"
check "the static build does not load libkolibri.so" sh -c "! ldd '$work/static/simple' | grep -q libkolibri"
check "the shared build records the SONAME" sh -c "readelf -d '$work/shared/simple' | grep -q 'NEEDED.*libkolibri.so.0'"

echo "== generate text"
prompt="def fibonacci(n):"
for build in shared/simple static/simple simple-pc; do
  check "$build generates" sh -c "'$work/$build' '$model' '$prompt' 16 > '$work/gen-${build//\//-}.txt'"
done
check "generated text continues the prompt" sh -c "test \$(wc -c < '$work/gen-shared-simple.txt') -gt \$(( \${#prompt} + 10 ))"
check "shared, static and pkg-config builds generate the same text" sh -c "cmp '$work/gen-shared-simple.txt' '$work/gen-static-simple.txt' && cmp '$work/gen-shared-simple.txt' '$work/gen-simple-pc.txt'"
sed 's/^/       | /' "$work/gen-shared-simple.txt"
check "simple prints llama.cpp's continuations (SPM vocabularies, with a space prefix and without)" python3 scripts/continuations.py "$work/shared/simple"
printf 'Write a haiku about the sea.\nNow make it about mountains.\n' > "$work/chat-in.txt"
check "chat.cpp holds a two-turn conversation" sh -c "'$work/shared/chat' '$model' 32 < '$work/chat-in.txt' > '$work/chat-out.txt' && test \$(grep -c '^assistant: .' '$work/chat-out.txt') -eq 2"
sed 's/^/       | /' "$work/chat-out.txt"
check "misuse: documented statuses and messages" "$work/shared/misuse" "$model" "$plain_model"
check "state: saved, loaded, continued bit-identically; bad states refused" "$work/shared/state" "$model" "$work/prompt.state"
check "speculative: lookup and a draft model give greedy's tokens; bad drafts refused" "$work/shared/speculative" "$model" "$large_model" "$plain_model"
check "mtp: the model's own block gives greedy's tokens, with lookup too; misuse refused" "$work/shared/mtp" "$mtp_model" "$no_block" "$mtp_agreeing"
check "assistant: Gemma 4's assistant gives greedy's tokens, with lookup too; misuse refused" "$work/shared/mtp" --assistant "$gemma4" "$assistant" "$no_block"
check "structured: a JSON schema constraint gives JSON of that shape; bad ones refused" sh -c "'$work/shared/structured' '$model' > '$work/structured.json' && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert set(d)=={\"city\",\"population\",\"capital\"} and isinstance(d[\"population\"],int) and isinstance(d[\"capital\"],bool), d' '$work/structured.json'"
sed 's/^/       | /' "$work/structured.json" 2>/dev/null || true

echo "== valgrind (errors and definite/indirect leaks fail; SIMD code runs ~50x slower there,"
echo "   so few tokens, and two single-threaded valgrind runs at a time)"
vg=(valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect)
check "valgrind: simple" "${vg[@]}" "$work/shared/simple" "$model" "$prompt" 2 &
check "valgrind: chat" sh -c "echo 'Hi' | ${vg[*]} '$work/shared/chat' '$model' 2" &
wait
# The smaller model: misuse loads its model several times.
check "valgrind: misuse" env KOLIBRI_SLOW=1 "${vg[@]}" "$work/shared/misuse" "$plain_model"

echo "== ASan + UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
check "asan: simple" "$work/asan/simple" "$model" "$prompt" 8
check "asan: chat" sh -c "echo 'Hi' | '$work/asan/chat' '$model' 8"
check "asan: misuse" "$work/asan/misuse" "$model" "$plain_model"
check "asan: state" "$work/asan/state" "$model" "$work/asan.state"
check "asan: speculative (prompt lookup)" "$work/asan/speculative" "$model"
check "asan: structured" "$work/asan/structured" "$model"
check "asan: mtp" "$work/asan/mtp" "$mtp_model" "$no_block"
check "asan: assistant" "$work/asan/mtp" --assistant "$gemma4" "$assistant" "$no_block"
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "== bindings"
# The 1.5B as a target lets the speculator tests draft with the 0.5B.
check "Go and C# bindings" env KOLIBRI_TEST_MODEL_LARGE="$large_model" KOLIBRI_TEST_MODEL_MTP="$mtp_agreeing" KOLIBRI_TEST_MODEL_GEMMA4="$gemma4" KOLIBRI_TEST_ASSISTANT="$assistant" bindings/test.sh "$prefix" "$model"

echo "== ThreadSanitizer: the threading contract (tests/capi_threads.rs: two contexts on one"
echo "   model, a context entered by two threads); std rebuilt instrumented (-Zbuild-std)"
if rustup component add rust-src >/dev/null 2>&1; then
  host=$(rustc -vV | sed -n 's/^host: //p')
  check "tsan: capi_threads" env RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=thread" \
    CARGO_TARGET_DIR=target/tsan TSAN_OPTIONS=halt_on_error=1 \
    cargo test -Zbuild-std --release --target "$host" --test capi_threads
else
  echo "     the rust-src component cannot be installed here: the TSan run needs it (skipped)"
fi

pass=$(grep -c '^ok' "$work/results" || true)
fail=$(grep -c '^FAIL' "$work/results" || true)
echo "c api: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
