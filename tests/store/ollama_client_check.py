"""The `ollama` Python client against `kolibri serve` started without -m (a model store
holding gemma3:270m, and a test Hub through HF_ENDPOINT): list, pull (streamed progress),
generate by name (loading on demand), ps, keep_alive 0 unloading, delete, and the idle unload
giving memory back; Ollama-shaped 404s.
Usage: ollama_client_check.py URL SERVER_PID HUB_MODEL"""
import sys
import time

import ollama

url, pid, hub_model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stored = hub_model.removeprefix("hf.co/")
c = ollama.Client(host=url)


def names():
    return [m.model for m in c.list().models]


def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


assert names() == ["gemma3:270m"], names()
for m in c.list().models:
    assert m.details.family == "gemma3" and m.details.quantization_level == "Q4_K_M", m

# Pull from the test Hub, progress streamed; it joins the list.
progress = list(c.pull(hub_model, stream=True))
assert progress[0].status == "pulling manifest", progress[0]
assert any(p.total and p.completed == p.total for p in progress), progress
assert progress[-1].status == "success", progress[-1]
assert stored in names(), names()
try:
    c.pull("qwen3", stream=False)
    raise AssertionError("a name that is not OWNER/REPO was pulled")
except ollama.ResponseError as e:
    assert e.status_code == 400 and "OWNER/REPO" in str(e), e

# Generating by name loads the model; ps shows it.
before = rss_kib()
r = c.generate(model=stored, prompt="def add(a, b):", raw=True,
               options={"num_predict": 4, "temperature": 0})
assert r.done and r.eval_count >= 1, r
assert [m.model for m in c.ps().models] == [stored], c.ps()
shown = c.show(stored)
assert shown.details.family == "qwen2", shown.details
loaded = rss_kib()
assert loaded > before + 100_000, (before, loaded)

# Another model replaces it (--models-max 1).
r = c.generate(model="GEMMA3:270m", prompt="Hello", raw=True, options={"num_predict": 2})
assert r.done, r
assert [m.model for m in c.ps().models] == ["gemma3:270m"], c.ps()

# No prompt and keep_alive 0 unloads it, as Ollama does; no prompt alone loads it again.
r = c.generate(model="gemma3:270m", keep_alive=0)
assert r.done and r.done_reason == "unload", r
assert not c.ps().models, c.ps()
r = c.generate(model="gemma3:270m")
assert r.done and r.done_reason == "load", r
assert [m.model for m in c.ps().models] == ["gemma3:270m"], c.ps()

# Idle: unloaded, and the memory goes back.
deadline = time.time() + 20
while c.ps().models and time.time() < deadline:
    time.sleep(0.2)
assert not c.ps().models, c.ps()
idle = rss_kib()
assert idle < loaded / 2, (loaded, idle)

# Delete: gone from the list; an unknown model is a 404.
c.delete(stored)
assert names() == ["gemma3:270m"], names()
try:
    c.delete(stored)
    raise AssertionError("deleted twice")
except ollama.ResponseError as e:
    assert e.status_code == 404, e
try:
    c.generate(model="nope:1b", prompt="x")
    raise AssertionError("an unknown model answered")
except ollama.ResponseError as e:
    assert e.status_code == 404, e
# An unknown endpoint under /api/ answers as Ollama does: {"error": "..."}.
import json
import urllib.error
import urllib.request
try:
    urllib.request.urlopen(url + "/api/nope", timeout=10)
    raise AssertionError("an unknown endpoint answered")
except urllib.error.HTTPError as e:
    assert e.code == 404 and isinstance(json.load(e)["error"], str), e
print("ok")
