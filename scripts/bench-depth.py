#!/usr/bin/env python3
"""Kolibri against llama.cpp at depth: prompt and generation speed with tokens already in the
KV cache, per KV cache type, interleaved on the same machine.

    LLAMA_BENCH=/path/to/llama-bench scripts/bench-depth.py [-m qwen2.5-coder-0.5b,...]
        [-d 0,4096,16384] [-k f16,q8_0] [-p 512] [-n 128] [-t 2] [-r 2]

For each model and KV type (keys and values alike), `kolibri bench -d ... -ctk T -ctv T` and
then `llama-bench -fa 1 -d ... -ctk T -ctv T` (flash attention, which llama.cpp needs for a
quantized value cache), and one Markdown table of tokens/s with Kolibri's ratio. Models are
names known to scripts/fetch-models.py or paths.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KOLIBRI = ROOT / "target" / "release" / "kolibri"


def model_path(name):
    if os.path.exists(name):
        return name
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch-models.py"), name,
                          "--path"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def common_args(a, kv):
    return ["-p", a.p, "-n", a.n, "-d", a.d, "-t", a.t, "-r", a.r, "-ctk", kv, "-ctv", kv,
            "-o", "json"]


def kolibri(model, a, kv):
    out = subprocess.run([str(KOLIBRI), "bench", "-m", model, *common_args(a, kv)],
                         check=True, capture_output=True, text=True)
    return {(r["test"], r["n_depth"], r["threads"]): r["avg_ts"] for r in json.loads(out.stdout)}


def llama(binary, model, a, kv):
    out = subprocess.run([binary, "-m", model, "-fa", "1", *common_args(a, kv)],
                         check=True, capture_output=True, text=True)
    rows = {}
    for r in json.loads(out.stdout):
        test = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
        rows[(test, r["n_depth"], r["n_threads"])] = r["avg_ts"]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    ap.add_argument("-d", default="0,4096,16384")
    ap.add_argument("-k", default="f16,q8_0", help="KV cache types (keys and values alike)")
    ap.add_argument("-p", default="512")
    ap.add_argument("-n", default="128")
    ap.add_argument("-t", default="2")
    ap.add_argument("-r", default="2")
    a = ap.parse_args()
    binary = os.environ.get("LLAMA_BENCH")
    if not binary:
        sys.exit("set LLAMA_BENCH to a llama-bench binary")
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kolibri"], cwd=ROOT,
                   check=True)
    print("| model | KV | test | threads | kolibri t/s | llama.cpp t/s | ratio |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name in a.m.split(","):
        model = model_path(name)
        for kv in a.k.split(","):
            ours, theirs = kolibri(model, a, kv), llama(binary, model, a, kv)
            for key in sorted(ours, key=lambda k: (k[0][:2] != "pp", k[1], k[2])):
                test, depth, t = key
                label = f"{test} @ d{depth}" if depth else test
                ref = theirs.get(key)
                ratio = f"{ours[key] / ref:.2f}x" if ref else "-"
                ref_cell = f"{ref:.1f}" if ref else "-"
                print(f"| {Path(model).name} | {kv} | {label} | {t} | {ours[key]:.1f} | "
                      f"{ref_cell} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
