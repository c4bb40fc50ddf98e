#!/usr/bin/env python3
"""Record llama.cpp's multi-token-prediction logits on the synthetic models with an MTP block
(tests/data/mtp/<model>.json), for tests/mtp_reference.rs.

    LLAMA_CPP=/path/to/llama.cpp scripts/record-mtp-reference.py

LLAMA_CPP is a llama.cpp source tree (0c1e57098, outside the repository) built with cmake into
its build/ folder. scripts/arch-reference/mtp_logits.c runs each prompt of
record-arch-reference.py through the target, then through llama.cpp's MTP context teacher-forced
(token p with the target's hidden state of token p - 1), with flash attention on (the
reference, top 5 per token) and off (top 64: llama.cpp's own spread over the same values).
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["qwen35-mtp-tiny", "qwen35moe-mtp-tiny"]


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


arch = _load("record_arch", "record-arch-reference.py")


def run(tool: Path, model: Path, flash: bool, top: int) -> list:
    out = subprocess.run([str(tool), str(model), "1" if flash else "0", str(top)] + arch.PROMPTS,
                         check=True, capture_output=True, text=True).stdout
    return arch.parse_cases(out)


def main() -> None:
    llama = Path(os.environ.get("LLAMA_CPP", ""))
    if not (llama / "include" / "llama.h").exists():
        sys.exit("set LLAMA_CPP to a built llama.cpp source tree")
    build = llama / "build" / "bin"
    out_dir = ROOT / "tests/data/mtp"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tool = Path(tmp) / "mtp_logits"
        subprocess.run(
            ["cc", "-O2", "-o", str(tool), str(ROOT / "scripts/arch-reference/mtp_logits.c"),
             f"-I{llama / 'include'}", f"-I{llama / 'ggml/include'}", f"-L{build}",
             f"-Wl,-rpath,{build}", "-lllama", "-lggml", "-lggml-base", "-lm"], check=True)
        for name in MODELS:
            model = Path(subprocess.run(
                [sys.executable, str(ROOT / "scripts/make-synthetic-models.py"), "--path", name],
                check=True, capture_output=True, text=True).stdout.strip())
            on, off = run(tool, model, True, 5), run(tool, model, False, 64)
            drift = arch.spread(on, off)
            print(f"{name}: flash attention on/off differ by {drift:.4f} nat on average")
            doc = {
                "model": name,
                "model_file": model.name,
                "model_sha256": arch.sha256_of(model),
                "reference": "llama.cpp 0c1e57098 (C API, an MTP context on the target's "
                             "hidden states, CPU, 2 threads, flash attention on)",
                "note": "token p paired with the target's hidden state (after the output norm) "
                        "of token p - 1, zeros for token 0; top_logprobs: the MTP block's "
                        "log-softmax, its prediction of token p + 1",
                "flash_attention_off_mean_abs_diff": round(drift, 5),
                "cases": [{
                    "prompt": prompt,
                    "prompt_ids": case["prompt_ids"],
                    "top_logprobs": [[{"id": t, "logprob": lp} for t, lp in s]
                                     for s in case["steps"]],
                } for prompt, case in zip(arch.PROMPTS, on)],
            }
            path = out_dir / f"{name}.json"
            path.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
