"""Three `kolibri serve` replicas behind nginx, configured by deploy/nginx/kolibri-replicas.conf.

Usage: test_replicas.py KOLIBRI_BINARY MODEL

- 8 clients each hold a conversation (an X-Conversation-Id header): the second turn lands on
  the replica that served the first, seen in /metrics as its prompt read from the cache;
- conversations without a pinned replica spread over more than one;
- one replica is killed: every request after that succeeds (nginx retries on the others).
"""

import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from test_openai import KEY, Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "deploy", "nginx", "kolibri-replicas.conf")
SYSTEM = ("You are a careful assistant for a team of engineers. Answer in one short sentence, "
          "name concrete tools where you can, and never apologise.")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(d, replica_ports, port):
    """nginx running the committed replica config, with these ports, as this user."""
    conf = open(CONF).read()
    for i, p in enumerate(replica_ports):
        conf = conf.replace(f"127.0.0.1:{8081 + i}", f"127.0.0.1:{p}")
    conf = conf.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{port};")
    with open(os.path.join(d, "kolibri-replicas.conf"), "w") as f:
        f.write(conf)
    temp = " ".join(f"{kind}_temp_path {d}/{kind};"
                    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"""worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    {temp}
    include {d}/kolibri-replicas.conf;
}}
""")
    proc = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-p", d, "-c",
                             os.path.join(d, "nginx.conf")], stderr=subprocess.PIPE, text=True)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"nginx did not start: {proc.stderr.read()}")


def chat(port, conversation, messages):
    body = json.dumps({"model": "m", "messages": messages, "max_tokens": 12,
                       "temperature": 0}).encode()
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    if conversation:
        headers["X-Conversation-Id"] = conversation
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None


def metric_sum(replicas, name):
    return [r.metric(name) for r in replicas]


def main():
    binary, model = sys.argv[1:3]
    results = []

    def report(name, ok, detail=""):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    replicas = [Server(binary, model, "--parallel", "8", "-t", "1", key=KEY) for _ in range(3)]
    d = tempfile.mkdtemp(prefix="kolibri-nginx-")
    nginx = None
    try:
        ports = [int(r.url.rsplit(":", 1)[1]) for r in replicas]
        port = free_port()
        nginx = start_nginx(d, ports, port)
        pool = concurrent.futures.ThreadPoolExecutor(8)

        # Turn 1 of 8 conversations.
        ids = [str(uuid.uuid4()) for _ in range(8)]
        first = [[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": f"Conversation {i}: which tool formats Rust code?"}]
                 for i in range(8)]
        served_before = metric_sum(replicas, "http_requests_total")
        replies = list(pool.map(lambda a: chat(port, *a), zip(ids, first)))
        assert all(code == 200 for code, _ in replies)
        served = [b - a for a, b in zip(served_before,
                                        metric_sum(replicas, "http_requests_total"))]
        # Each replica's own /metrics read counts once there.
        spread = sum(1 for n in served if n > 1)
        report("conversations spread over the replicas", spread >= 2, f"requests per replica {served}")

        # Turn 2: the same conversations go back to their replica, whose cache holds turn 1.
        cached_before = sum(metric_sum(replicas, "prompt_tokens_cached_total"))
        second = [msgs + [{"role": "assistant", "content": r["choices"][0]["message"]["content"]},
                          {"role": "user", "content": "And which one lints it?"}]
                  for msgs, (_, r) in zip(first, replies)]
        replies2 = list(pool.map(lambda a: chat(port, *a), zip(ids, second)))
        assert all(code == 200 for code, _ in replies2)
        cached = sum(metric_sum(replicas, "prompt_tokens_cached_total")) - cached_before
        turn1 = sum(r["usage"]["prompt_tokens"] for _, r in replies)
        report("a conversation's second turn lands on the replica holding its prefix",
               cached >= 0.9 * turn1, f"{cached:.0f} prompt tokens from cache, turn 1 had {turn1}")

        # Failover: kill one replica; every request after that succeeds.
        victim = replicas.pop(0)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        later = [(str(uuid.uuid4()), [{"role": "user", "content": f"Say hello {i}."}])
                 for i in range(16)]
        codes = []
        for result in pool.map(lambda a: chat(port, *a), later):
            codes.append(result[0])
        report("one replica killed: every later request succeeds", codes == [200] * 16,
               f"{codes.count(200)} of 16")
    finally:
        if nginx:
            nginx.terminate()
            nginx.wait(timeout=30)
        for r in replicas:
            r.stop()
        shutil.rmtree(d, ignore_errors=True)
    failed = results.count(False)
    print(f"replicas: {len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
