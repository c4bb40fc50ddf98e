#!/usr/bin/env python3
"""Record llama.cpp's multi-token-prediction logits on the synthetic models with an MTP block,
and its Gemma 4 assistant's on the synthetic assistant files (tests/data/mtp/<model>.json), for
tests/mtp_reference.rs.

    LLAMA_CPP=/path/to/llama.cpp scripts/record-mtp-reference.py

LLAMA_CPP is a llama.cpp source tree (0c1e57098, outside the repository) built with cmake into
its build/ folder. scripts/arch-reference/mtp_logits.c runs each prompt of
record-arch-reference.py through the target, then through llama.cpp's MTP context teacher-forced
(token p with the target's hidden state of token p - 1), with flash attention on (the
reference, top 5 per token) and off (top 64: llama.cpp's own spread over the same values).
scripts/arch-reference/assistant_logits.c does the same for an assistant beside its target
(token p with the target's hidden state of token p - 1, over the target's cache before p).
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
# Assistant drafters and their targets.
ASSISTANTS = {"gemma4-assistant-tiny": "gemma4-tiny"}


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


arch = _load("record_arch", "record-arch-reference.py")


def run(tool: Path, models: list, flash: bool, top: int) -> list:
    out = subprocess.run([str(tool)] + [str(m) for m in models] + ["1" if flash else "0", str(top)]
                         + arch.PROMPTS, check=True, capture_output=True, text=True).stdout
    return arch.parse_cases(out)


def synthetic(name: str) -> Path:
    return Path(subprocess.run(
        [sys.executable, str(ROOT / "scripts/make-synthetic-models.py"), "--path", name],
        check=True, capture_output=True, text=True).stdout.strip())


def compile_tool(llama: Path, source: str, out: Path) -> None:
    build = llama / "build" / "bin"
    subprocess.run(
        ["cc", "-O2", "-o", str(out), str(ROOT / "scripts/arch-reference" / source),
         f"-I{llama / 'include'}", f"-I{llama / 'ggml/include'}", f"-L{build}",
         f"-Wl,-rpath,{build}", "-lllama", "-lggml", "-lggml-base", "-lm"], check=True)


def record(name: str, tool: Path, models: list, reference: str, note: str, extra: dict) -> None:
    on, off = run(tool, models, True, 5), run(tool, models, False, 64)
    drift = arch.spread(on, off)
    print(f"{name}: flash attention on/off differ by {drift:.4f} nat on average")
    doc = {
        "model": name,
        "model_file": models[-1].name,
        "model_sha256": arch.sha256_of(models[-1]),
        **extra,
        "reference": reference,
        "note": note,
        "flash_attention_off_mean_abs_diff": round(drift, 5),
        "cases": [{
            "prompt": prompt,
            "prompt_ids": case["prompt_ids"],
            "top_logprobs": [[{"id": t, "logprob": lp} for t, lp in s]
                             for s in case["steps"]],
        } for prompt, case in zip(arch.PROMPTS, on)],
    }
    path = ROOT / "tests/data/mtp" / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


def main() -> None:
    llama = Path(os.environ.get("LLAMA_CPP", ""))
    if not (llama / "include" / "llama.h").exists():
        sys.exit("set LLAMA_CPP to a built llama.cpp source tree")
    (ROOT / "tests/data/mtp").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tool = Path(tmp) / "mtp_logits"
        compile_tool(llama, "mtp_logits.c", tool)
        for name in MODELS:
            record(name, tool, [synthetic(name)],
                   "llama.cpp 0c1e57098 (C API, an MTP context on the target's hidden states, "
                   "CPU, 2 threads, flash attention on)",
                   "token p paired with the target's hidden state (after the output norm) of "
                   "token p - 1, zeros for token 0; top_logprobs: the MTP block's log-softmax, "
                   "its prediction of token p + 1", {})
        tool = Path(tmp) / "assistant_logits"
        compile_tool(llama, "assistant_logits.c", tool)
        for name, target in ASSISTANTS.items():
            target_path = synthetic(target)
            record(name, tool, [target_path, synthetic(name)],
                   "llama.cpp 0c1e57098 (C API, an assistant context sharing the target's KV "
                   "cache, CPU, 2 threads, flash attention on)",
                   "from token 1 on: token p at position p paired with the target's hidden "
                   "state (after the output norm) of token p - 1, over the target's cache of "
                   "positions before p; top_logprobs: the assistant's log-softmax, its "
                   "prediction of token p + 1",
                   {"target": target, "target_sha256": arch.sha256_of(target_path)})


if __name__ == "__main__":
    main()
