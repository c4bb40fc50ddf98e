"""Soak test: `kolibri serve --parallel 4` under 16 clients for a bounded time.

Usage: soak.py KOLIBRI_BINARY MODEL [--minutes 10] [--window 60]

Fifteen clients mix streaming and non-streaming chat and completions, streams abandoned
mid-way, bad requests and long prompts, each from its own fixed random sequence (the load is
the same from one window to the next). A sixteenth, the probe, sends one identical request
after another: its latency is what is compared. Asserts, and prints the figures:
- no 5xx response at all (none is intended under this load);
- every abandoned stream is cancelled: the server's cancelled count equals the abandoned
  streams, and no slot is busy a moment after the clients stop;
- RSS at the end within 5% of RSS after the first window;
- the probe's p99 latency in the last window within 20% of the first window's;
- the request log: one line per request the server counted, none with the key or a body.
"""

import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "server"))
from test_openai import KEY, Server  # noqa: E402

LONG_PROMPT = " ".join(f"Item {i}: the quick brown fox jumps over the lazy dog." for i in range(120))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.statuses = {}
        self.abandoned = 0
        self.probe = []  # (finish time, latency)
        self.errors = []

    def status(self, code):
        with self.lock:
            self.statuses[code] = self.statuses.get(code, 0) + 1


def post(url, path, body, stream=False, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method="POST", headers={
        "Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=300)


def one_request(url, rng, stats):
    kind = rng.choices(["chat", "chat_stream", "completion", "abandon", "bad", "long"],
                       weights=[3, 3, 3, 2, 1, 1])[0]
    chat = {"model": "m", "messages": [{"role": "user", "content": f"Count to {rng.randint(3, 9)}."}],
            "max_tokens": rng.randint(8, 48), "temperature": 0.7, "seed": rng.randint(0, 1 << 30)}
    try:
        if kind == "chat":
            with post(url, "/v1/chat/completions", chat) as r:
                r.read()
                stats.status(r.status)
        elif kind == "chat_stream":
            with post(url, "/v1/chat/completions", dict(chat, stream=True)) as r:
                for _ in r:
                    pass
                stats.status(r.status)
        elif kind == "completion":
            body = {"model": "m", "prompt": "def add(a, b):", "max_tokens": rng.randint(8, 48)}
            with post(url, "/v1/completions", body) as r:
                r.read()
                stats.status(r.status)
        elif kind == "abandon":
            body = {"model": "m", "prompt": "Once upon a time", "max_tokens": 400, "stream": True}
            leave_after = rng.randint(2, 6)  # lines of the stream read before leaving
            with post(url, "/v1/completions", body) as r:
                stats.status(r.status)
                for i, _ in enumerate(r):
                    if i == leave_after:
                        break
            with stats.lock:
                stats.abandoned += 1
        elif kind == "bad":
            raw = rng.choice([b"{not json", json.dumps({"model": "m", "prompt": "x",
                                                         "max_tokens": -5}).encode(),
                              json.dumps({"model": "m", "messages": "nope"}).encode()])
            path = rng.choice(["/v1/completions", "/v1/chat/completions"])
            with post(url, path, None, raw=raw) as r:
                stats.status(r.status)
        else:
            body = {"model": "m", "prompt": LONG_PROMPT, "max_tokens": 8}
            with post(url, "/v1/completions", body) as r:
                r.read()
                stats.status(r.status)
    except urllib.error.HTTPError as e:
        e.read()
        stats.status(e.code)
    except OSError as e:
        with stats.lock:
            stats.errors.append(f"{kind}: {e}")


def probe(url, stats, stop):
    body = {"model": "m", "prompt": "The capital of France is", "max_tokens": 16,
            "temperature": 0}
    while not stop.is_set():
        t = time.time()
        try:
            with post(url, "/v1/completions", body) as r:
                r.read()
                stats.status(r.status)
            with stats.lock:
                stats.probe.append((time.time(), time.time() - t))
        except urllib.error.HTTPError as e:
            stats.status(e.code)


def p99(latencies):
    xs = sorted(latencies)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--window", type=float, default=60.0, help="seconds compared, first and last")
    args = ap.parse_args()
    server = Server(args.binary, args.model, "--parallel", "4", "-c", "2048", "--queue", "256",
                    key=KEY)
    stats = Stats()
    stop = threading.Event()
    try:
        # Every slot's whole cache written once first, so that RSS after the first window
        # includes the KV pages any request can touch: what grows after that is a leak.
        warm = {"model": "m", "prompt": LONG_PROMPT, "max_tokens": 8}
        warmers = [threading.Thread(target=lambda: post(server.url, "/v1/completions",
                                                        warm).read()) for _ in range(4)]
        for t in warmers:
            t.start()
        for t in warmers:
            t.join()
        cancelled_before = server.metric("requests_cancelled_total")

        def client(seed):
            rng = random.Random(seed)
            while not stop.is_set():
                one_request(server.url, rng, stats)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(15)]
        threads.append(threading.Thread(target=probe, args=(server.url, stats, stop)))
        start = time.time()
        for t in threads:
            t.start()
        end = start + args.minutes * 60
        time.sleep(args.window)
        rss_first = server.rss_kib()
        while time.time() < end:
            time.sleep(min(5.0, max(0.0, end - time.time())))
        rss_last = server.rss_kib()
        stop.set()
        for t in threads:
            t.join(timeout=300)
        # An abandoned request still waiting for a slot is noticed when it is admitted (its
        # first write fails): give the last ones a few steps.
        settle = time.time()
        while time.time() - settle < 10:
            busy = server.metric("slots_busy")
            cancelled = server.metric("requests_cancelled_total") - cancelled_before
            if cancelled >= stats.abandoned and busy == 0:
                break
            time.sleep(0.1)
        settle = time.time() - settle
        requests = server.metric("http_requests_total")
    finally:
        stop.set()
        code = server.stop()
    log = [line for line in server.log().splitlines() if " /" in line]
    secrets = (KEY, "Count to", "Once upon", "quick brown fox", "def add")
    leaked = [line for line in log if any(s in line for s in secrets)]

    first = [lat for t, lat in stats.probe if t - start <= args.window]
    last = [lat for t, lat in stats.probe if t >= end - args.window]
    n = sum(stats.statuses.values())
    server_errors = sum(c for s, c in stats.statuses.items() if s >= 500)
    print(f"soak: {args.minutes:g} min, {n} responses {dict(sorted(stats.statuses.items()))}, "
          f"{len(stats.errors)} connection errors, {stats.abandoned} streams abandoned, "
          f"{cancelled:.0f} cancelled ({settle:.1f} s after the clients stopped)")
    print(f"soak: RSS {rss_first / 1024:.0f} MiB after {args.window:g} s, "
          f"{rss_last / 1024:.0f} MiB at the end ({(rss_last / rss_first - 1) * 100:+.1f}%)")
    print(f"soak: probe p99 {p99(first) * 1000:.0f} ms in the first {args.window:g} s "
          f"({len(first)} requests), {p99(last) * 1000:.0f} ms in the last ({len(last)}), "
          f"{(p99(last) / p99(first) - 1) * 100:+.1f}%")
    checks = [
        ("no 5xx responses", server_errors == 0),
        ("no connection errors", not stats.errors),
        ("every abandoned stream cancelled, no slot left busy",
         cancelled == stats.abandoned and busy == 0),
        ("RSS at the end within 5% of the first window's", rss_last <= 1.05 * rss_first),
        ("probe p99 in the last window within 20% of the first's",
         len(first) > 0 and len(last) > 0 and p99(last) <= 1.2 * p99(first)),
        ("clean exit on SIGTERM", code == 0),
        (f"one log line per request ({len(log)} lines, {requests:.0f} requests)",
         len(log) == requests),
        ("no log line with the key or a request body", not leaked),
    ]
    for name, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} soak: {name}")
    for e in stats.errors[:5]:
        print(f"     {e}")
    failed = sum(1 for _, ok in checks if not ok)
    print(f"soak: {len(checks) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
