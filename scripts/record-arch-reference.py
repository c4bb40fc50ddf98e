#!/usr/bin/env python3
"""Record llama.cpp's greedy outputs on the synthetic models (tests/data/arch/<model>.json).

    LLAMA_CPP=/path/to/llama.cpp scripts/record-arch-reference.py [--only qwen3-tiny,...]

LLAMA_CPP is a llama.cpp source tree (0c1e57098, outside the repository) built with cmake into
its build/ folder. The script compiles scripts/arch-reference/greedy_logprobs.c against that
build, runs it on each model built by scripts/make-synthetic-models.py with flash attention on
(the reference, greedy) and off (teacher-forced on the reference's tokens), records how far
apart the two are on the reference's top 5 over every step (llama.cpp's own spread: the tests
allow 1.5x it), and refuses a model on which they disagree by more than CONDITIONING_TOL nat on
average (a badly conditioned model makes the reference noise). The JSON has the layout of
tests/data/greedy-*.json plus the model file's sha256, which the tests check so that a changed
generator cannot pass against an old reference.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N_PREDICT = 24
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "Once upon a time, in a small village by the sea, there lived",
    # Longer than the test models' windows (8 and 32 tokens) and than the 64 queries from
    # which a prompt is computed in tiles.
    "The committee met on Tuesday to review the budget for the coming year. After a long "
    "debate about roads, schools and the new library, the chair asked each member to write "
    "down three priorities. Most of them named the bridge over the river first, since it had "
    "been closed twice during the spring floods, and the treasurer warned that repairs would "
    "cost more than the town had set aside. In the end they agreed to",
]
CONDITIONING_TOL = 0.04


def _fetch_models():
    spec = importlib.util.spec_from_file_location("fetch_models", ROOT / "scripts/fetch-models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sha256_of = _fetch_models().sha256_of


def compile_tool(llama: Path, out: Path) -> None:
    build = llama / "build" / "bin"
    subprocess.run(
        ["cc", "-O2", "-o", str(out), str(ROOT / "scripts/arch-reference/greedy_logprobs.c"),
         f"-I{llama / 'include'}", f"-I{llama / 'ggml/include'}", f"-L{build}",
         f"-Wl,-rpath,{build}", "-lllama", "-lggml", "-lggml-base", "-lm"],
        check=True,
    )


def run_tool(tool: Path, model: Path, flash: bool, forced: list = None) -> list:
    """[{prompt_ids, steps: [[(id, logprob) x 5], ...]}] per prompt; with `forced` (one token
    list per prompt), teacher-forced on those tokens, each step's top 64."""
    args = [str(tool), str(model), "1" if flash else "0", str(N_PREDICT)]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        if forced is not None:
            f.write("".join(" ".join(map(str, ids)) + "\n" for ids in forced))
            f.flush()
            args.append(f"force:{f.name}")
        out = subprocess.run(args + PROMPTS, check=True, capture_output=True, text=True).stdout
    return parse_cases(out)


def parse_cases(out: str) -> list:
    """The cases a reference tool printed: "case", "prompt ID...", a "step ID LOGPROB ..." line
    per step, and "pieces HEX..." where greedy."""
    cases = []
    for line in out.splitlines():
        head, *rest = line.split()
        if head == "case":
            cases.append({"prompt_ids": [], "steps": []})
        elif head == "prompt":
            cases[-1]["prompt_ids"] = [int(x) for x in rest]
        elif head == "step":
            cases[-1]["steps"].append([(int(rest[i]), float(rest[i + 1]))
                                       for i in range(0, len(rest), 2)])
        elif head == "pieces":
            cases[-1]["pieces"] = ["" if p == "-" else p for p in rest]
    return cases


def spread(on: list, forced_off: list) -> float:
    """Mean |Δ log-prob| over every step and the reference's top 5, between the reference and
    a run teacher-forced on its tokens: what the tests measure Kolibri by."""
    diffs = []
    for a, b in zip(on, forced_off):
        assert len(a["steps"]) == len(b["steps"]), "the forced run took other steps"
        for sa, sb in zip(a["steps"], b["steps"]):
            lb = dict(sb)
            missing = [t for t, _ in sa if t not in lb]
            if missing:
                sys.exit(f"tokens {missing} of the reference's top 5 are not in the other "
                         "run's top 64: the model is badly conditioned")
            diffs += [abs(lp - lb[t]) for t, lp in sa]
    return sum(diffs) / max(len(diffs), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated synthetic model names")
    args = ap.parse_args()
    llama = Path(os.environ.get("LLAMA_CPP", ""))
    if not (llama / "include" / "llama.h").exists():
        sys.exit("set LLAMA_CPP to a built llama.cpp source tree")
    names = subprocess.run([sys.executable, str(ROOT / "scripts/make-synthetic-models.py"),
                            "--list"], check=True, capture_output=True, text=True).stdout
    names = [l.split("\t")[0] for l in names.splitlines() if l.endswith("\ttest")]
    if args.only:
        names = args.only.split(",")
    commit = subprocess.run(["git", "-C", str(llama), "rev-parse", "--short=9", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "0c1e57098"
    out_dir = ROOT / "tests/data/arch"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tool = Path(tmp) / "greedy_logprobs"
        compile_tool(llama, tool)
        for name in names:
            model, runs_on = (Path(subprocess.run(
                [sys.executable, str(ROOT / "scripts/make-synthetic-models.py"), flag, name],
                check=True, capture_output=True, text=True).stdout.strip())
                for flag in ("--path", "--reference-path"))
            on = run_tool(tool, runs_on, True)
            off = run_tool(tool, runs_on, False, [[s[0][0] for s in c["steps"]] for c in on])
            drift = spread(on, off)
            print(f"{name}: flash attention on/off differ by {drift:.4f} nat on average")
            if drift > CONDITIONING_TOL:
                sys.exit(f"{name} is badly conditioned: rescale its weights")
            doc = {
                "model": name,
                "model_file": model.name,
                "model_sha256": sha256_of(model),
                "reference": f"llama.cpp {commit} (C API, CPU, 2 threads, flash attention on), "
                             "greedy",
                "note": "prompt tokenized with add_special=true, parse_special=true; "
                        "top_logprobs are log-softmax over the full vocabulary",
                # Over every step of every case, teacher-forced on the reference's tokens.
                "flash_attention_off_mean_abs_diff": round(drift, 5),
                **({"reference_ran_on": runs_on.name} if runs_on != model else {}),
                "cases": [{
                    "prompt": prompt,
                    "prompt_ids": case["prompt_ids"],
                    "generated_ids": [s[0][0] for s in case["steps"]],
                    # Each generated token's bytes as llama.cpp streams them, in hex.
                    "generated_pieces_hex": case["pieces"],
                    "top_logprobs": [[{"id": t, "logprob": lp} for t, lp in s]
                                     for s in case["steps"]],
                } for prompt, case in zip(PROMPTS, on)],
            }
            path = out_dir / f"{name}.json"
            path.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
