#!/usr/bin/env python3
"""Record what llama.cpp says about a vocabulary beyond its tokenizer cases
(tests/data/vocab/<name>.json): BOS, EOS, line feed and add-BOS, the end-of-generation and
control ids, a digest of every token's piece (with and without special tokens shown) and a few
texts tokenized with special tokens parsed.

    LLAMA_CPP=/path/to/llama.cpp scripts/record-vocab-reference.py gemma-4 [...]

NAME is one of llama.cpp's models/ggml-vocab-NAME.gguf (scripts/fetch-models.py vocab).
command-r is left out on purpose: llama.cpp prints its tokens with characters outside GPT-2's
byte map as `[UNK_BYTE_0x..]` markers, Kolibri as the characters (src/tokenizer/byte_map.rs).
LLAMA_CPP is a llama.cpp source tree (0c1e57098, outside the repository) built with cmake.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Chat markup, a user-defined marker, runs of line feeds, a character without a token of its
# own (byte fallback), spaces of every width.
TEXTS = [
    "<bos><start_of_turn>user\nHi <|\"|>there\n\n\n\n<turn|> \U0001f999",
    "  two\t\ttabs,   three spaces\n" + "\n" * 40 + "end ",
    "<|turn>model\n<|channel>thought\n...<channel|>Hello",
]


def pieces_digest(lines: list) -> str:
    """sha256 over every token's two pieces, one line each: the tests compute the same."""
    return hashlib.sha256("".join(l + "\n" for l in lines).encode()).hexdigest()


def main() -> None:
    llama = Path(os.environ.get("LLAMA_CPP", ""))
    if not (llama / "include" / "llama.h").exists():
        sys.exit("set LLAMA_CPP to a built llama.cpp source tree")
    folder = subprocess.run([sys.executable, str(ROOT / "scripts/fetch-models.py"), "--path",
                             "vocab"], check=True, capture_output=True, text=True).stdout.strip()
    build = llama / "build" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        tool = Path(tmp) / "vocab_probe"
        subprocess.run(["cc", "-O2", "-o", str(tool),
                        str(ROOT / "scripts/vocab-reference/vocab_probe.c"),
                        f"-I{llama / 'include'}", f"-I{llama / 'ggml/include'}", f"-L{build}",
                        f"-Wl,-rpath,{build}", "-lllama", "-lggml", "-lggml-base"], check=True)
        for name in sys.argv[1:]:
            vocab = Path(folder) / f"ggml-vocab-{name}.gguf"
            out = subprocess.run([str(tool), str(vocab)] + TEXTS, check=True,
                                 capture_output=True, text=True).stdout.splitlines()
            bos, eos, nl, add_bos = (int(x) for x in out[0].split()[1:])
            pieces = [l[len("piece "):] for l in out if l.startswith("piece ")]
            doc = {
                "vocab": name,
                "reference": "llama.cpp 0c1e57098 (C API, vocab_only)",
                "bos": bos, "eos": eos, "newline": nl, "add_bos": bool(add_bos),
                "eog": [int(x) for x in out[1].split()[1:]],
                "control": [int(x) for x in out[2].split()[1:]],
                "pieces_note": "per token, token_to_piece without then with special tokens, as "
                               "'HEX- HEX-' lines; sha256 of all lines, each ending in a line feed",
                "pieces_sha256": pieces_digest(pieces),
                "texts": [{"text": t, "ids": [int(x) for x in l.split()[1:]]}
                          for t, l in zip(TEXTS, [l for l in out if l.startswith("tokens")])],
            }
            dest = ROOT / "tests/data/vocab" / f"{name}.json"
            dest.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
            print(f"wrote {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
