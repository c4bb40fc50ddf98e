#!/usr/bin/env bash
# Builds Kolibri and installs the C library into a prefix:
#   scripts/install.sh --prefix DIR
# installs DIR/include/kolibri.h, DIR/lib/libkolibri.so.X.Y.Z (+ .so.X and .so links),
# DIR/lib/libkolibri.a, DIR/lib/cmake/Kolibri/ (find_package) and DIR/lib/pkgconfig/kolibri.pc.
# The installed tree is relocatable: move or copy it anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    *) echo "usage: scripts/install.sh --prefix DIR" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "usage: scripts/install.sh --prefix DIR" >&2; exit 2; }
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

# The C library carries no HTTP stack: the "server" feature is only for the kolibri binary.
cargo build --release --lib --no-default-features --features grammar,soname
out="${CARGO_TARGET_DIR:-target}/release"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
major="${version%%.*}"
minor="${version#*.}"; minor="${minor%%.*}"
lib="$prefix/lib"

install -d "$prefix/include" "$lib/cmake/Kolibri" "$lib/pkgconfig"
install -m 644 include/kolibri.h "$prefix/include/kolibri.h"
# Installed libraries carry no debug info (the release profile keeps some for profiling).
strip --strip-debug -o "$lib/libkolibri.so.$version" "$out/libkolibri.so"
strip --strip-debug -o "$lib/libkolibri.a" "$out/libkolibri.a"
chmod 755 "$lib/libkolibri.so.$version"
chmod 644 "$lib/libkolibri.a"
ln -sfn "libkolibri.so.$version" "$lib/libkolibri.so.$major"
ln -sfn "libkolibri.so.$major" "$lib/libkolibri.so"

configure() {
  sed -e "s/@KOLIBRI_VERSION@/$version/g" \
      -e "s/@KOLIBRI_VERSION_MAJOR@/$major/g" \
      -e "s/@KOLIBRI_VERSION_MINOR@/$minor/g" "$1" > "$2"
}
configure cmake/KolibriConfig.cmake.in "$lib/cmake/Kolibri/KolibriConfig.cmake"
configure cmake/KolibriConfigVersion.cmake.in "$lib/cmake/Kolibri/KolibriConfigVersion.cmake"
configure cmake/kolibri.pc.in "$lib/pkgconfig/kolibri.pc"

# libllama.so, llama.h's C API over Kolibri, for tools written against llama.cpp. It goes in a
# directory of its own so it never shadows a system libllama: a tool uses it when pointed there
# (LD_LIBRARY_PATH, LLAMA_CPP_LIB_PATH, or -L/-rpath at link time). Its SONAME,
# libllama-kolibri.so.0, is not llama.cpp's.
cargo build --release -p kolibri-llama
install -d "$lib/kolibri-llama"
strip --strip-debug -o "$lib/kolibri-llama/libllama-kolibri.so.0" "$out/libllama.so"
chmod 755 "$lib/kolibri-llama/libllama-kolibri.so.0"
ln -sfn libllama-kolibri.so.0 "$lib/kolibri-llama/libllama.so"
echo "installed Kolibri $version into $prefix (llama.h's libllama.so in $lib/kolibri-llama)"
