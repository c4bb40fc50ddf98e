#!/usr/bin/env python3
"""Kolibri against llama.cpp, same machine, same method, interleaved.

    scripts/bench-compare.py [-m gemma-3-270m,qwen2.5-coder-0.5b,...] [-p 512] [-n 128]
                             [-t 1,2] [-r 3]

Runs `kolibri bench -o json` for each model and thread count and, when LLAMA_BENCH names a
llama-bench binary, llama-bench with the same arguments right after it (interleaved, so both
see the same machine state), and likewise ik_llama.cpp's llama-bench when IK_LLAMA_BENCH names
one (with `-rtr 1`, so it repacks its weights at load), then prints one Markdown table with
the ratios. With several
prompt sizes it also prints each batch's time against the smallest batch's (-p 1,5 -n 0: a
batch of 5 tokens against one). Also measures time to first token and peak RSS of
`kolibri run -n 1` (and of LLAMA_SIMPLE, a llama.cpp `llama-simple` binary, when set). Models
are names known to scripts/fetch-models.py or paths.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KOLIBRI = ROOT / "target" / "release" / "kolibri"


def model_path(name):
    if os.path.exists(name):
        return name
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch-models.py"), name, "--path"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def kolibri_bench(model, p, n, t, r):
    out = subprocess.run([str(KOLIBRI), "bench", "-m", model, "-p", p, "-n", n, "-t", str(t),
                          "-r", str(r), "-o", "json"], check=True, capture_output=True, text=True)
    return {(row["test"], row["threads"]): row for row in json.loads(out.stdout)}


def llama_bench(binary, model, p, n, t, r, extra=()):
    out = subprocess.run([binary, "-m", model, "-p", p, "-n", n, "-t", str(t), "-r", str(r),
                          "-o", "json", *extra], check=True, capture_output=True, text=True)
    rows = {}
    for row in json.loads(out.stdout):
        test = f"pp{row['n_prompt']}" if row["n_gen"] == 0 else f"tg{row['n_gen']}"
        rows[(test, row["n_threads"])] = row
    return rows


def first_token(cmd):
    """Wall seconds and peak RSS (MiB) of a command that loads a model and makes one token."""
    start = time.monotonic()
    out = subprocess.run(["/usr/bin/time", "-f", "RSS_KB=%M"] + cmd, capture_output=True,
                         text=True)
    wall = time.monotonic() - start
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {out.stderr[-500:]}")
    rss = int(re.search(r"RSS_KB=(\d+)", out.stderr).group(1)) / 1024
    return wall, rss


def batch_ms(rows, n, t):
    """Mean milliseconds per prompt batch of n tokens at t threads, or None where not run."""
    row = rows.get((f"pp{n}", t))
    return 1000 * n / row["avg_ts"] if row else None


def cost_cell(ms, base):
    return f"{ms:.1f} ({ms / base:.2f}x)" if ms and base else "-"


def print_batch_costs(batch_costs):
    """With several prompt sizes: each batch's time against the smallest batch's, per engine
    (a batch of N tokens should cost little more than one while the weights dominate)."""
    sizes = sorted({int(test[2:]) for _, _, ours, _ in batch_costs for test, _ in ours
                    if test.startswith("pp")})
    if len(sizes) < 2:
        return
    print("\n| model | threads | batch | kolibri ms (x smallest) | llama.cpp ms (x smallest) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, t, ours, theirs in batch_costs:
        base = (batch_ms(ours, sizes[0], t), batch_ms(theirs, sizes[0], t))
        for n in sizes[1:]:
            mine = cost_cell(batch_ms(ours, n, t), base[0])
            ref = cost_cell(batch_ms(theirs, n, t), base[1])
            print(f"| {name} | {t} | pp{n} | {mine} | {ref} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", default="gemma-3-270m,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    ap.add_argument("-p", default="512")
    ap.add_argument("-n", default="128")
    ap.add_argument("-t", default="2")
    ap.add_argument("-r", default="3")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kolibri"], cwd=ROOT,
                   check=True)
    llama = os.environ.get("LLAMA_BENCH")
    ik = os.environ.get("IK_LLAMA_BENCH")
    simple = os.environ.get("LLAMA_SIMPLE")
    threads = [int(t) for t in args.t.split(",")]

    ik_head = (" ik_llama.cpp t/s | ratio |", " ---: | ---: |") if ik else ("", "")
    print(f"| model | test | threads | kolibri t/s | llama.cpp t/s | ratio |{ik_head[0]}")
    print(f"| --- | ---: | ---: | ---: | ---: | ---: |{ik_head[1]}")
    startup = []
    batch_costs = []

    def cells(row, ref):
        if not ref:
            return " - | - |"
        return (f" {ref['avg_ts']:.2f} ± {ref['stddev_ts']:.2f} |"
                f" {row['avg_ts'] / ref['avg_ts']:.2f}x |")

    for name in args.m.split(","):
        path = model_path(name)
        for t in threads:
            ours = kolibri_bench(path, args.p, args.n, t, args.r)
            theirs = llama_bench(llama, path, args.p, args.n, t, args.r) if llama else {}
            fork = llama_bench(ik, path, args.p, args.n, t, args.r, ("-rtr", "1")) if ik else {}
            batch_costs.append((Path(path).name, t, ours, theirs))
            for key, row in ours.items():
                ik_cells = cells(row, fork.get(key)) if ik else ""
                print(f"| {Path(path).name} | {key[0]} | {t} | {row['avg_ts']:.2f} ± "
                      f"{row['stddev_ts']:.2f} |{cells(row, theirs.get(key))}{ik_cells}",
                      flush=True)
        t = threads[-1]
        ours = first_token([str(KOLIBRI), "run", "--raw", "-m", path, "-p", "Hello", "-n", "1",
                            "--temp", "0", "-t", str(t)])
        theirs = first_token([simple, "-m", path, "-n", "1", "Hello"]) if simple else None
        startup.append((Path(path).name, ours, theirs))

    print_batch_costs(batch_costs)

    print("\n| model | kolibri: start to first token, peak RSS | llama.cpp | ratio (time, RSS) |")
    print("| --- | ---: | ---: | ---: |")
    for name, (w, rss), theirs in startup:
        ref = f"{theirs[0]:.2f} s, {theirs[1]:.0f} MiB" if theirs else "-"
        ratio = f"{w / theirs[0]:.2f}x, {rss / theirs[1]:.2f}x" if theirs else "-"
        print(f"| {name} | {w:.2f} s, {rss:.0f} MiB | {ref} | {ratio} |")


if __name__ == "__main__":
    main()
