#!/usr/bin/env python3
"""Writes tests/data/infill/llama-server.json: llama-server's /infill answer to each request of
tests/data/infill/requests.json (greedy), which tests/server_infill.rs compares Kolibri's with:
the middle, and each generated token's text and its lead over the runner-up (nat), so the test
compares up to the first close call, as tests/reference_greedy.rs does.

Usage: infill-reference.py LLAMA_SERVER MODEL   (llama.cpp 0c1e57098's llama-server binary)
"""

import json
import os
import sys

import llama_server

HERE = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "infill")


def main():
    server, model = sys.argv[1], sys.argv[2]
    # One slot of 4096 tokens, as the test's `kolibri serve --parallel 1 -c 4096`.
    with llama_server.running(server, model, 18123, "-np", "1", "-c", "4096") as url:
        with open(os.path.join(HERE, "requests.json")) as f:
            cases = json.load(f)
        out = []
        for case in cases:
            answer = llama_server.post(url + "/infill", dict(case["request"], n_probs=2))
            steps = [{"text": p["token"],
                      "gap": p["top_logprobs"][0]["logprob"] - p["top_logprobs"][1]["logprob"]}
                     for p in answer["completion_probabilities"]]
            out.append({"name": case["name"], "content": answer["content"],
                        "tokens_evaluated": answer["tokens_evaluated"], "steps": steps})
        with open(os.path.join(HERE, "llama-server.json"), "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")

if __name__ == "__main__":
    main()
