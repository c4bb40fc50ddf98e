"""llama-server (outside the repository) for the scripts that record its answers:
infill-reference.py and rerank-reference.py."""

import contextlib
import json
import subprocess
import time
import urllib.request


@contextlib.contextmanager
def running(server: str, model: str, port: int, *args: str):
    """llama-server on `model` at 127.0.0.1:`port` with `args`, once it answers /health;
    yields its URL and stops it after."""
    proc = subprocess.Popen([server, "-m", model, "--port", str(port), "-t", "2", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait()


def post(url: str, body: dict):
    """The JSON answer to `body` POSTed to `url`."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)
