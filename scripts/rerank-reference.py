#!/usr/bin/env python3
"""Writes tests/data/rerank/llama-server.json: llama-server's /v1/rerank answer to each request
of tests/data/rerank/requests.json on the synthetic reranker (qwen3-reranker-tiny of
scripts/make-synthetic-models.py), which tests/server_rerank.rs compares Kolibri's with: the
order, the scores and the usage.

Usage: rerank-reference.py LLAMA_SERVER   (llama.cpp 0c1e57098's llama-server binary)
"""

import hashlib
import json
import os
import subprocess
import sys

import llama_server

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HERE = os.path.join(ROOT, "tests", "data", "rerank")


def main():
    server = sys.argv[1]
    model = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/make-synthetic-models.py"),
                            "--path", "qwen3-reranker-tiny"],
                           check=True, capture_output=True, text=True).stdout.strip()
    with llama_server.running(server, model, 18124, "--reranking", "-np", "1",
                              "-c", "2048") as url:
        with open(os.path.join(HERE, "requests.json")) as f:
            cases = json.load(f)
        out = []
        for case in cases:
            answer = llama_server.post(url + "/v1/rerank", case["request"])
            if isinstance(answer, dict):
                answer["model"] = "qwen3-reranker-tiny"  # not this machine's path
            out.append({"name": case["name"], "response": answer})
    digest = hashlib.sha256(open(model, "rb").read()).hexdigest()
    with open(os.path.join(HERE, "llama-server.json"), "w") as f:
        # The model's sha256: a changed generator cannot pass against an old reference.
        json.dump({"model_sha256": digest, "cases": out}, f, indent=2)
        f.write("\n")

if __name__ == "__main__":
    main()
