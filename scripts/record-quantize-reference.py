#!/usr/bin/env python3
"""Records what llama-quantize writes, for tests/requantize.rs to hold `kolibri quantize` to.

For each (reference model, file type) it runs llama-quantize (LLAMA_QUANTIZE=/path, the
llama.cpp build DEVELOPERS.md names) with --allow-requantize and prints one line:

    MODEL FILE_TYPE TYPES_SHA256 DATA_SHA256

over the output's tensors in name order: TYPES_SHA256 of "name ggml-type-id\\n" per tensor
(the mix), DATA_SHA256 of name, NUL, the type id as u32 little-endian and the tensor's bytes
(everything). Needs the `gguf` Python package. Usage:

    LLAMA_QUANTIZE=.../llama-quantize scripts/record-quantize-reference.py > tests/data/llama-quantize.txt
"""

import hashlib
import os
import struct
import subprocess
import sys
import tempfile

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))

# Models are reference models, or synthetic/NAME for scripts/make-synthetic-models.py's.
# Every file type on the 0.5B (its 896-wide rows take the fallbacks), a few on gemma (tied
# output, a 262k vocabulary).
CASES = [
    ("qwen2.5-coder-0.5b",
     "Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 "
     "IQ4_NL IQ4_XS F16 BF16"),
    ("gemma-3-270m", "Q4_K_M Q3_K_M IQ4_XS Q2_K"),
    # MXFP4 experts (gpt-oss's mix): a synthetic MoE whose experts are F16.
    ("synthetic/qwen3moe-tiny", "MXFP4_MOE"),
]


def hashes(path):
    r = gguf.GGUFReader(path)
    types, data = hashlib.sha256(), hashlib.sha256()
    for t in sorted(r.tensors, key=lambda t: t.name):
        ty = int(t.tensor_type)
        types.update(f"{t.name} {ty}\n".encode())
        data.update(t.name.encode() + b"\0" + struct.pack("<I", ty))
        data.update(t.data.tobytes())
    return types.hexdigest(), data.hexdigest()


def main():
    tool = os.environ.get("LLAMA_QUANTIZE")
    if not tool:
        sys.exit("set LLAMA_QUANTIZE to llama.cpp's llama-quantize")
    fetch = os.path.join(HERE, "fetch-models.py")
    print("# llama-quantize (llama.cpp 0c1e57098) --allow-requantize on the reference models:")
    print("# model file_type sha256(name type per tensor) sha256(name, type, bytes per tensor)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, types in CASES:
            if name.startswith("synthetic/"):
                make = os.path.join(HERE, "make-synthetic-models.py")
                cmd = [sys.executable, make, "--path", name.split("/", 1)[1]]
            else:
                cmd = [sys.executable, fetch, name, "--path"]
            model = subprocess.check_output(cmd, text=True).strip().splitlines()[-1]
            prefix = "synthetic/" if name.startswith("synthetic/") else ""
            for ft in types.split():
                out = os.path.join(tmp, "out.gguf")
                subprocess.run([tool, "--allow-requantize", model, out, ft, "2"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                th, dh = hashes(out)
                print(f"{prefix}{os.path.basename(model)} {ft} {th} {dh}", flush=True)
                os.remove(out)


if __name__ == "__main__":
    main()
