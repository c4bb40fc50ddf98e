"""One llama-cpp-python script timed on two libllama builds, side by side in one run.

Usage: bench-libllama.py MODEL THREADS LIBDIR_A LIBDIR_B [...]

Each library directory is given to llama-cpp-python as LLAMA_CPP_LIB_PATH in a child process
(a process loads one libllama). Prints prompt and generation speed per library and the ratios
to the first. Figures belong in notes, not in tests.
"""

import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
import llama_cpp
model, threads = sys.argv[1], int(sys.argv[2])
llm = llama_cpp.Llama(model_path=model, n_ctx=2048, n_batch=512, n_threads=threads,
                      n_threads_batch=threads, verbose=False)
prompt = ("Write a Python module that parses a CSV file of transactions (date, account, amount), "
          "validates every row, groups the amounts by account and month, and prints a report. "
          "Use dataclasses, type hints and docstrings.\n\n```python\n")
n_prompt = len(llm.tokenize(prompt.encode()))
llm.create_completion(prompt, max_tokens=4, temperature=0.0)   # warm-up
best_pp, best_tg, n_gen = 0.0, 0.0, 0
for _ in range(3):
    llm.reset()
    t = time.perf_counter()
    llm.create_completion(prompt, max_tokens=1, temperature=0.0)
    best_pp = max(best_pp, n_prompt / (time.perf_counter() - t))
    # The prompt is cached now: what follows is generation.
    t = time.perf_counter()
    out = llm.create_completion(prompt, max_tokens=128, temperature=0.0)
    n_gen = out["usage"]["completion_tokens"]
    best_tg = max(best_tg, n_gen / (time.perf_counter() - t))
print(json.dumps({"pp": best_pp, "tg": best_tg, "n_prompt": n_prompt, "n_gen": n_gen}))
"""


def main():
    model, threads, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
    rows = []
    for lib in libs:
        env = dict(os.environ, LLAMA_CPP_LIB_PATH=lib)
        out = subprocess.run([sys.executable, "-c", CHILD, model, threads], env=env,
                             check=True, capture_output=True, text=True).stdout
        rows.append((lib, json.loads(out.strip().splitlines()[-1])))
    base = rows[0][1]
    print(f"{os.path.basename(model)}, {threads} threads, prompt {base['n_prompt']} tokens, "
          f"{base['n_gen']} generated")
    for lib, r in rows:
        print(f"  {lib}: PP {r['pp']:.1f} t/s, TG {r['tg']:.2f} t/s "
              f"(x{r['pp'] / base['pp']:.2f} PP, x{r['tg'] / base['tg']:.2f} TG vs the first)")


if __name__ == "__main__":
    main()
