#!/usr/bin/env bash
# Tests the language bindings against an installed Kolibri: the Go package (go vet, go test,
# go test -race) and the C# bindings (mcs build, then the mono test program). Works offline and with an
# empty or read-only HOME.
#
#   bindings/test.sh PREFIX MODEL [MODEL_WITHOUT_CHAT_TEMPLATE]
#
# PREFIX is where Kolibri is installed (PREFIX/lib/libkolibri.so, PREFIX/lib/pkgconfig);
# MODEL is Qwen2.5-Coder-0.5B-Instruct (q4_k_m) GGUF: the tests check its greedy output and
# chat template. The optional third model, one without a chat template (gemma-3-270m), adds
# the NOT_FOUND checks. KOLIBRI_TEST_MODEL_LARGE, if set (Qwen2.5-Coder-1.5B-Instruct), adds the
# speculators' draft-model checks (the 0.5B drafting for it); KOLIBRI_TEST_MODEL_MTP (a Qwen3.5
# file with a multi-token-prediction block) the block's; KOLIBRI_TEST_MODEL_GEMMA4 and
# KOLIBRI_TEST_ASSISTANT (a Gemma 4 file and its assistant) the assistant's. Swift is built and tested only
# where a Swift toolchain exists.
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 PREFIX MODEL [MODEL_WITHOUT_CHAT_TEMPLATE]" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
prefix="$(cd "$1" && pwd)"
model="$(readlink -f "$2")"            # the tests run in other directories
plain="${3:+$(readlink -f "$3")}"
for f in "$prefix/lib/pkgconfig/kolibri.pc" "$model" ${plain:+"$plain"}; do
    [ -f "$f" ] || { echo "error: $f does not exist" >&2; exit 2; }
done

section() { printf '\n==== %s ====\n' "$*"; }
started=$SECONDS
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KOLIBRI_TEST_MODEL="$model"
if [ -n "$plain" ]; then export KOLIBRI_TEST_MODEL_NO_TEMPLATE="$plain"; else unset KOLIBRI_TEST_MODEL_NO_TEMPLATE; fi

section "environment"
echo "kolibri (pkg-config): $(pkg-config --modversion kolibri)  cflags: $(pkg-config --cflags kolibri)"
echo "model: $model"
if [ -n "$plain" ]; then echo "model without chat template: $plain"; fi

section "Go: vet and test (bindings/go)"
t0=$SECONDS
go version
# Offline, and never fetch a toolchain or module: the package has no dependencies.
export GOFLAGS=-mod=mod GOPROXY=off GOWORK=off CGO_ENABLED=1
# Go's build cache does not key cgo packages on pkg-config's output, so a package compiled
# against an earlier (since deleted) prefix would be linked with that prefix's -L. The CGO_*
# variables are part of the key: naming this prefix in them forces a rebuild per prefix.
export CGO_CFLAGS="-I$prefix/include ${CGO_CFLAGS:--g -O2}" CGO_LDFLAGS="-L$prefix/lib ${CGO_LDFLAGS:--g -O2}"
if [ -n "$(go env GOTOOLCHAIN 2>/dev/null)" ]; then export GOTOOLCHAIN=local; fi
# The build cache defaults to $HOME/.cache/go-build: use a scratch one if HOME is unusable.
if [ -z "${HOME:-}" ] || [ ! -w "${HOME:-/nonexistent}" ]; then
    export GOCACHE="$scratch/go-cache" GOPATH="$scratch/gopath"
fi
(cd "$here/go" && go vet ./... && go test -count=1 -v ./...)
# The threading contract under Go's race detector: two contexts on one model from two
# goroutines, and handles closed in any order.
section "go test -race"
(cd "$here/go" && go test -race -count=1 -run 'TestConcurrentContexts|TestCloseOrder' ./...)
echo "Go: passed in $((SECONDS - t0)) s"

section "C#: build (bindings/csharp)"
t0=$SECONDS
mono --version | head -n 1
"$here/csharp/build.sh" "$scratch/csharp"

section "C#: run the test program"
mono "$scratch/csharp/KolibriTests.exe" "$model" ${plain:+"$plain"}
echo "C#: passed in $((SECONDS - t0)) s"

section "Swift (bindings/swift)"
if command -v swift >/dev/null 2>&1; then
    (cd "$here/swift" && swift test)
else
    echo "skipped: no Swift toolchain on this machine"
fi

section "all binding tests passed in $((SECONDS - started)) s"
