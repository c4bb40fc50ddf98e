#!/usr/bin/env bash
# Compiles the bindings (Kolibri.dll) and the test program (KolibriTests.exe) with mono's mcs.
#   bindings/csharp/build.sh [OUT_DIR]   (default: bindings/csharp/build)
# Run the tests with: LD_LIBRARY_PATH=PREFIX/lib mono OUT_DIR/KolibriTests.exe MODEL.gguf
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/build}"
mkdir -p "$out"
# mcs accepts C# up to 7.2; -warn:4 with -doc also flags public members lacking doc comments.
mcs -langversion:7.2 -warn:4 -warnaserror -target:library -doc:"$out/Kolibri.xml" \
    -out:"$out/Kolibri.dll" "$here"/src/*.cs
mcs -langversion:7.2 -warn:4 -warnaserror -r:"$out/Kolibri.dll" \
    -out:"$out/KolibriTests.exe" "$here/tests/Program.cs"
echo "built $out/Kolibri.dll and $out/KolibriTests.exe"
