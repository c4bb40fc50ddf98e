#!/usr/bin/env python3
"""llama.cpp's greedy continuations of the reference prompts, up to each one's first close call
(top-1/top-2 gap under 0.1 nat, where greedy output may legitimately part): SentencePiece
vocabularies with a space prefix (the synthetic phi3 and llama-spm models, whose references
carry each generated token's bytes as llama_token_to_piece writes them) and without one
(Gemma 3 270M). A generated token keeps its leading space.

    scripts/continuations.py PROGRAM   # runs `PROGRAM MODEL PROMPT N` on each case and checks
                                       # that it prints the prompt, then llama.cpp's text

Imported by tests/server/test_openai.py for the server's streams.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLOSE_CALL_GAP = 0.1
SYNTHETIC = ["phi3-tiny", "mistral-tiny"]
REAL = "gemma-3-270m"


def _upto_close_call(tops):
    return next((i for i, (a, b) in enumerate(tops) if a - b < CLOSE_CALL_GAP), len(tops))


def _model_path(cmd):
    return subprocess.run([sys.executable, *cmd], check=True, capture_output=True,
                          text=True).stdout.strip()


def reference_continuations():
    """[(model path, [(prompt, n_tokens, text)])]; bytes that never form UTF-8 are U+FFFD."""
    models = []
    for name in SYNTHETIC:
        with open(os.path.join(ROOT, "tests/data/arch", f"{name}.json")) as f:
            doc = json.load(f)
        cases = []
        for c in doc["cases"]:
            n = _upto_close_call([(s[0]["logprob"], s[1]["logprob"]) for s in c["top_logprobs"]])
            text = bytes.fromhex("".join(c["generated_pieces_hex"][:n]))
            cases.append((c["prompt"], n, text.decode("utf-8", "replace")))
        path = _model_path([os.path.join(ROOT, "scripts/make-synthetic-models.py"), "--path", name])
        models.append((path, cases))
    with open(os.path.join(ROOT, f"tests/data/greedy-{REAL}.json")) as f:
        doc = json.load(f)
    cases = []
    for c in doc["cases"]:
        n = _upto_close_call([(s["top"][0]["logprob"], s["top"][1]["logprob"]) for s in c["steps"]])
        cases.append((c["prompt"], n, "".join(s["token"] for s in c["steps"][:n])))
    path = _model_path([os.path.join(ROOT, "scripts/fetch-models.py"), "--path", REAL])
    models.append((path, cases))
    return models


def main():
    program = sys.argv[1:]
    if not program:
        sys.exit(__doc__)
    failures, checked = [], 0
    for path, cases in reference_continuations():
        for prompt, n, want in cases:
            if n == 0:
                continue
            out = subprocess.run([*program, path, prompt, str(n)], capture_output=True)
            printed = out.stdout.decode("utf-8", "replace")
            checked += 1
            if out.returncode != 0 or printed != f"{prompt}{want}\n":
                failures.append(f"{os.path.basename(path)} {prompt!r}: printed "
                                f"{printed[len(prompt):]!r}, llama.cpp {want!r}")
    print("\n".join(failures) or f"{checked} continuations as llama.cpp's")
    sys.exit(1 if failures or checked == 0 else 0)


if __name__ == "__main__":
    main()
