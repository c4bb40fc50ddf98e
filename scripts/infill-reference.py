#!/usr/bin/env python3
"""Writes tests/data/infill/llama-server.json: llama-server's /infill answer to each request of
tests/data/infill/requests.json (greedy), which tests/server_infill.rs compares Kolibri's with:
the middle, and each generated token's text and its lead over the runner-up (nat), so the test
compares up to the first close call, as tests/reference_greedy.rs does.

Usage: infill-reference.py LLAMA_SERVER MODEL   (llama.cpp 0c1e57098's llama-server binary)
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "infill")


def main():
    server, model = sys.argv[1], sys.argv[2]
    port = 18123
    # One slot of 4096 tokens, as the test's `kolibri serve --parallel 1 -c 4096`.
    proc = subprocess.Popen([server, "-m", model, "--port", str(port), "-np", "1", "-c", "4096",
                             "-t", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        with open(os.path.join(HERE, "requests.json")) as f:
            cases = json.load(f)
        out = []
        for case in cases:
            body = json.dumps(dict(case["request"], n_probs=2)).encode()
            req = urllib.request.Request(url + "/infill", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=300) as r:
                answer = json.load(r)
            steps = [{"text": p["token"],
                      "gap": p["top_logprobs"][0]["logprob"] - p["top_logprobs"][1]["logprob"]}
                     for p in answer["completion_probabilities"]]
            out.append({"name": case["name"], "content": answer["content"],
                        "tokens_evaluated": answer["tokens_evaluated"], "steps": steps})
        with open(os.path.join(HERE, "llama-server.json"), "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
