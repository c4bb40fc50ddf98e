#!/usr/bin/env python3
"""Load benchmark for `kolibri serve` (and llama-server, when LLAMA_SERVER points at one).

    scripts/serve-bench.py -m MODEL [--parallel 1,4] [--clients 8] [--requests 5]
                           [--max-tokens 64] [--temperature 0.7] [-t 2]
                           [--edit] [--kolibri-args ';--lookup']

--edit sends edit-this-code requests (the answer repeats the input: what prompt lookup
speeds up) instead of explanations; --kolibri-args runs kolibri once per ';'-separated set of
extra `serve` arguments (an empty set is the plain server).

For each server and --parallel value: start the server, warm it up with one request, then run
`clients` threads that each send `requests` streaming chat requests one after another. Prints
one table: aggregate completion tokens/s (all tokens / wall time), mean time to first token,
mean and p95 request latency, and for Kolibri its /metrics: forward passes, tokens per pass,
drafted tokens and the share accepted. Servers run one after another, never at the same time.
Standard library only.
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

TOPICS = ["binary search", "a linked list", "recursion", "hash maps", "unit tests",
          "git rebase", "HTTP caching", "SQL joins", "closures", "garbage collection"]


def start_kolibri(model, parallel, threads, n_ctx, extra=()):
    exe = os.path.join(os.path.dirname(__file__), "..", "target", "release", "kolibri")
    proc = subprocess.Popen([exe, "serve", "-m", model, "--port", "0", "-t", str(threads),
                             "--parallel", str(parallel), "-c", str(n_ctx), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"http://([\d.]+):(\d+)", proc.stdout.readline())
    return proc, m.group(1), int(m.group(2))


def start_llama(model, parallel, threads, n_ctx, port=18765):
    proc = subprocess.Popen([os.environ["LLAMA_SERVER"], "-m", model, "--port", str(port),
                             "-t", str(threads), "-np", str(parallel),
                             "-c", str(n_ctx * parallel)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc, "127.0.0.1", port
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("llama-server did not start")


def chat(host, port, content, args):
    """One streaming chat request; returns (ttft, latency, completion tokens)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}],
                       "max_tokens": args.max_tokens, "temperature": args.temperature,
                       "stream": True, "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=600)
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read())
    ttft, chunks, usage = None, 0, None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        d = json.loads(line[6:])
        if d.get("usage"):
            usage = d["usage"]["completion_tokens"]
        for c in d.get("choices", []):
            if c.get("delta", {}).get("content"):
                chunks += 1
                if ttft is None:
                    ttft = time.perf_counter() - t0
    conn.close()
    return ttft or 0.0, time.perf_counter() - t0, usage if usage is not None else chunks


def edit_request(n):
    names = ["total", "count", "result", "value", "items", "data"]
    old, new = names[n % len(names)], f"{names[n % len(names)]}_{n}"
    code = "\n".join([
        f"def summarize(rows):",
        f"    {old} = {{}}",
        f"    for row in rows:",
        f"        key = row['name']",
        f"        {old}[key] = {old}.get(key, 0) + row['amount']",
        f"    return {old}",
        f"",
        f"def report(rows):",
        f"    {old} = summarize(rows)",
        f"    for key in sorted({old}):",
        f"        print(key, {old}[key])",
    ])
    return (f"Rename the variable `{old}` to `{new}` in this code and output the whole code, "
            f"nothing else:\n```python\n{code}\n```")


def pass_metrics(host, port):
    """Kolibri's forward-pass and speculation counters (see src/server/metrics.rs)."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    value = lambda name: float(re.search(rf"^\S*{name} (\S+)$", text, re.M).group(1))
    passes, tokens = value("forward_passes_total"), value("forward_tokens_total")
    drafted, accepted = value("drafted_tokens_total"), value("accepted_tokens_total")
    return (f"{passes:.0f} passes, {tokens / max(passes, 1):.1f} tokens/pass, {drafted:.0f} "
            f"drafted, {100 * accepted / max(drafted, 1):.0f}% accepted")


def run_load(host, port, args):
    results, lock = [], threading.Lock()

    def client(i):
        for j in range(args.requests):
            topic = TOPICS[(i * args.requests + j) % len(TOPICS)]
            if args.edit:
                res = chat(host, port, edit_request(i * args.requests + j), args)
            else:
                res = chat(host, port, f"Explain {topic} to a new programmer (client {i}, "
                           f"question {j}).", args)
            with lock:
                results.append(res)

    chat(host, port, "Warm up.", args)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttfts = [r[0] for r in results]
    lat = sorted(r[1] for r in results)
    tokens = sum(r[2] for r in results)
    return {"tps": tokens / wall, "ttft": statistics.mean(ttfts), "lat": statistics.mean(lat),
            "p95": lat[min(len(lat) - 1, int(round(0.95 * len(lat))) - 1)], "tokens": tokens,
            "wall": wall}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--parallel", default="1,4")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("-c", "--ctx", type=int, default=2048, help="context per slot")
    p.add_argument("--edit", action="store_true", help="edit-this-code prompts")
    p.add_argument("--kolibri-args", default="", help="';'-separated sets of serve arguments")
    args = p.parse_args()
    engines = []
    for extra in args.kolibri_args.split(";"):
        extra = extra.split()
        label = " ".join(["kolibri", *extra])
        engines.append((label, lambda m, par, t, c, e=extra: start_kolibri(m, par, t, c, e)))
    if os.environ.get("LLAMA_SERVER"):
        engines.append(("llama-server", start_llama))
    print(f"{args.clients} clients x {args.requests} streaming chat requests, max_tokens "
          f"{args.max_tokens}, temperature {args.temperature}, {args.threads} threads\n")
    print("| server | parallel | tokens/s | mean TTFT s | mean latency s | p95 latency s | "
          "tokens | wall s | passes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for parallel in [int(x) for x in args.parallel.split(",")]:
        for name, start in engines:
            proc, host, port = start(args.model, parallel, args.threads, args.ctx)
            try:
                r = run_load(host, port, args)
                passes = "" if name == "llama-server" else pass_metrics(host, port)
            finally:
                proc.terminate()
                proc.wait()
            print(f"| {name} | {parallel} | {r['tps']:.1f} | {r['ttft']:.2f} | {r['lat']:.2f} | "
                  f"{r['p95']:.2f} | {r['tokens']} | {r['wall']:.1f} | {passes} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
