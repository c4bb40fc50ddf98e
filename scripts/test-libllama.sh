#!/usr/bin/env bash
# libllama.so (libllama/): llama.h's C API over Kolibri, checked with llama.cpp's own material
# from the llama-cpp-python 0.3.36 sdist (downloaded from PyPI, never committed):
# - llama_h_layout.c, compiled against that llama.h: every struct's size and field offsets;
# - misuse.c: wrong calls return llama.h's failure values with a log line, the process lives;
# - llama.cpp's examples/simple and examples/simple-chat, built against that llama.h and linked
#   with Kolibri's libllama: simple's greedy text equals `kolibri run`'s, simple-chat holds a
#   two-turn chat on stdin;
# - llama-cpp-python, installed without its own library, on Kolibri's libllama
#   (check_llama_cpp_python.py), and llama-cpp-python's own test suite (our conftest maps its
#   model downloads to the reference models).
# Prints "libllama: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$root/target/libllama-check
mkdir -p "$work"
cargo build --release -p kolibri-llama
cargo test --release -p kolibri-llama 2>&1
cargo build --release --bin kolibri
model=${KOLIBRI_MODELS:-$HOME/.cache/kolibri/models}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf

sdist=$work/llama_cpp_python-0.3.36
if [ ! -d "$sdist" ]; then
  python3 -m pip download --quiet --no-binary :all: --no-deps llama-cpp-python==0.3.36 -d "$work"
  tar -xzf "$work/llama_cpp_python-0.3.36.tar.gz" -C "$work"
fi
py=$work/python
if [ ! -d "$py/llama_cpp" ]; then
  # LLAMA_BUILD=OFF: the package's Python code only; the library comes from LLAMA_CPP_LIB_PATH.
  CMAKE_ARGS="-DLLAMA_BUILD=OFF" python3 -m pip install --quiet --target "$py" \
    "$work/llama_cpp_python-0.3.36.tar.gz" pytest scipy pydantic
fi

# The library under the names a program looks for: libllama.so to link, its SONAME to run.
lib=$work/lib
mkdir -p "$lib"
ln -sf "$root/target/release/libllama.so" "$lib/libllama.so"
ln -sf "$root/target/release/libllama.so" "$lib/libllama-kolibri.so.0"
inc=(-I"$sdist/vendor/llama.cpp/include" -I"$sdist/vendor/llama.cpp/ggml/include")
link=(-L"$lib" -lllama -Wl,-rpath,"$lib")

passed=0
failed=0
check() { # name, command...: runs the command, counts and reports it
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}

cc -Wall -Werror "${inc[@]}" libllama/tests/llama_h_layout.c "${link[@]}" -o "$work/layout"
check "layout: every struct of llama.h" "$work/layout"

cc -Wall -Werror "${inc[@]}" libllama/tests/misuse.c "${link[@]}" -o "$work/misuse"
check "misuse through the shim" "$work/misuse" "$model"

every_function_exported() { # tools bind every symbol of llama.h when they start
  nm -D --defined-only "$root/target/release/libllama.so" | awk '{print $3}' >"$work/exported"
  python3 - "$sdist/vendor/llama.cpp/include/llama.h" "$work/exported" <<'PY'
import re, sys
header = re.sub(r"//[^\n]*|/\*.*?\*/", "", open(sys.argv[1]).read(), flags=re.S)
declared = set(re.findall(r"LLAMA_API[^;]*?\b(llama_[a-z0-9_]+)\s*\(", header, flags=re.S))
missing = sorted(declared - set(open(sys.argv[2]).read().split()))
print(f"{len(declared)} functions declared in llama.h, {len(missing)} not exported {missing}")
sys.exit(1 if missing or len(declared) < 200 else 0)
PY
}
check "exports: every function llama.h declares" every_function_exported

examples=$sdist/vendor/llama.cpp/examples
c++ -std=c++17 -O1 "${inc[@]}" "$examples/simple/simple.cpp" "${link[@]}" -o "$work/simple"
c++ -std=c++17 -O1 "${inc[@]}" "$examples/simple-chat/simple-chat.cpp" "${link[@]}" -o "$work/simple-chat"
simple_matches() {
  local prompt="def quicksort(items):" ours reference
  ours=$("$work/simple" -m "$model" -n 40 "$prompt" 2>/dev/null) || return 1
  # `kolibri run` ends its output with a newline of its own (command substitution drops it).
  reference=$(target/release/kolibri run --raw -m "$model" -p "$prompt" -n 40 --temp 0 2>/dev/null)
  printf 'simple:      %q\nkolibri run: %q\n' "$ours" "$reference"
  [ -n "$reference" ] && [ "$ours" = "$reference" ]
}
check "examples/simple: the greedy continuation of kolibri run" simple_matches
split_model_matches() { # the model in three parts (kolibri quantize COPY), loaded from the first
  local prompt="def quicksort(items):" parts=$work/split ours reference
  rm -rf "$parts" && mkdir -p "$parts"
  target/release/kolibri quantize "$model" "$parts/m.gguf" COPY --split-max-size 180M 2>/dev/null ||
    return 1
  [ -f "$parts/m-00003-of-00003.gguf" ] || return 1
  ours=$("$work/simple" -m "$parts/m-00001-of-00003.gguf" -n 40 "$prompt" 2>/dev/null) || return 1
  reference=$(target/release/kolibri run --raw -m "$model" -p "$prompt" -n 40 --temp 0 2>/dev/null)
  rm -rf "$parts"
  [ -n "$reference" ] && [ "$ours" = "$reference" ]
}
check "examples/simple on the model split in three parts" split_model_matches
two_turns() {
  local chat
  chat=$(printf 'What is 2+2? Reply with the number only.\nAnd 3+3? Reply with the number only.\n' |
    timeout 300 "$work/simple-chat" -m "$model" -c 2048 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g')
  echo "$chat"
  # Two prompts answered: "> 4", "> 6", then the prompt waiting for a third turn.
  [ "$(grep -c '^> ' <<<"$chat")" -ge 2 ] && grep -q '4' <<<"$chat" && grep -q '6' <<<"$chat"
}
check "examples/simple-chat: a two-turn chat on stdin" two_turns

export LLAMA_CPP_LIB_PATH=$lib
status=0
PYTHONPATH=$py python3 libllama/tests/check_llama_cpp_python.py target/release/kolibri "$model" \
  >"$work/check.log" 2>&1 || status=$?
cat "$work/check.log"
n_ok=$(grep -c '^ok ' "$work/check.log" || true)
n_bad=$(grep -c '^FAIL ' "$work/check.log" || true)
passed=$((passed + n_ok)); failed=$((failed + n_bad))
[ "$status" -eq 0 ] || [ "$n_bad" -gt 0 ] || failed=$((failed + 1))

cp libllama/tests/llama_cpp_python_suite/conftest.py "$sdist/tests/conftest.py"
suite() {
  (cd "$sdist" && PYTHONPATH=$py python3 -m pytest -p no:cacheprovider -q -rA tests/) \
    >"$work/suite.log" 2>&1
  local status=$?
  grep -E '^(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) |^[0-9]+ (passed|failed)' "$work/suite.log"
  return $status
}
check "llama-cpp-python's own test suite" suite

echo "libllama: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
