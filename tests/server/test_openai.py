"""Drives `kolibri serve` with the official `openai` Python package (unmodified, from PyPI).

Usage: test_openai.py KOLIBRI_BINARY CHAT_MODEL NO_TEMPLATE_MODEL
Starts servers on free loopback ports, runs every check, prints one line per check and
`server: N passed, M failed`; exits non-zero on any failure.
"""

import concurrent.futures
import json
import os
import re
import subprocess
import tempfile
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

import openai

KEY = "test-key-0123456789"
RESULTS = []


class Server:
    """A `kolibri serve` process on a free port; stopped with SIGTERM."""

    def __init__(self, binary, model, *extra, key=None):
        args = [binary, "serve", "-m", model, "--port", "0", "-t", "2", "-c", "1024", *extra]
        env = dict(os.environ)
        env.pop("KOLIBRI_API_KEY", None)
        if key:
            env["KOLIBRI_API_KEY"] = key  # the key from the environment, not the command line
        # The request log goes to a file: a pipe nobody reads would fill and stop the server.
        self.stderr = tempfile.NamedTemporaryFile(mode="w+", prefix="kolibri-serve-", suffix=".log")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env=env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://[\d.]+:\d+)", line)
        if not m:
            raise RuntimeError(f"server did not start: {line!r} {self.log()}")
        self.url = m.group(1)

    def client(self, key=KEY, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **kw)

    def get(self, path, key=KEY):
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()

    def post_raw(self, path, body, key=KEY):
        req = urllib.request.Request(self.url + path, data=body, method="POST",
                                     headers={"Authorization": f"Bearer {key}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def metric(self, name):
        _, text = self.get("/metrics")
        m = re.search(rf"^kolibri_{name} (\S+)$", text, re.M)
        return float(m.group(1))

    def log(self):
        """What the server wrote on stderr so far: its notes and a line per request."""
        with open(self.stderr.name) as f:
            return f.read()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return self.proc.returncode


def check(name):
    def wrap(fn):
        def run(*a):
            t = time.time()
            try:
                fn(*a)
                RESULTS.append((name, True))
                print(f"ok   {name} ({time.time() - t:.1f} s)", flush=True)
            except Exception:
                RESULTS.append((name, False))
                print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
        return run
    return wrap


CHAT = [{"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name three primary colors."}]


@check("models: list and retrieve")
def models(s):
    c = s.client()
    listed = c.models.list().data
    assert len(listed) == 1 and listed[0].object == "model", listed
    assert c.models.retrieve(listed[0].id).id == listed[0].id
    try:
        c.models.retrieve("no-such-model")
        raise AssertionError("expected 404")
    except openai.NotFoundError:
        pass


@check("chat: non-streaming, usage and finish reason")
def chat(s):
    r = s.client().chat.completions.create(model="any", messages=CHAT, max_tokens=24,
                                           temperature=0)
    ch = r.choices[0]
    assert r.object == "chat.completion" and ch.message.role == "assistant"
    assert ch.message.content.strip(), r
    assert ch.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 24
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    if ch.finish_reason == "length":
        assert r.usage.completion_tokens == 24


@check("chat: streaming deltas, finish chunk, usage chunk")
def chat_stream(s):
    stream = s.client().chat.completions.create(
        model="any", messages=CHAT, max_tokens=16, temperature=0.7, seed=3, stream=True,
        stream_options={"include_usage": True})
    text, roles, finish, usage, n_chunks = "", [], None, None, 0
    for chunk in stream:
        n_chunks += 1
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert roles == ["assistant"] and text.strip() and finish in ("stop", "length")
    assert usage and 0 < usage.completion_tokens <= 16 and n_chunks >= 3
    # The same seed gives the same text again (the prompt now comes from the slot's cache).
    again = s.client().chat.completions.create(
        model="any", messages=CHAT, max_tokens=16, temperature=0.7, seed=3)
    again2 = s.client().chat.completions.create(
        model="any", messages=CHAT, max_tokens=16, temperature=0.7, seed=3)
    assert again.choices[0].message.content == again2.choices[0].message.content
    assert again2.usage.prompt_tokens_details.cached_tokens > 0


@check("completions: non-streaming, streaming, stop strings")
def completions(s):
    c = s.client()
    r = c.completions.create(model="any", prompt="1, 2, 3, 4, 5,", max_tokens=30,
                             temperature=0, stop=[" 9"])
    t = r.choices[0].text
    assert r.object == "text_completion" and r.choices[0].finish_reason == "stop", r
    assert "8" in t and " 9" not in t, t
    pieces = [ch.choices[0].text for ch in c.completions.create(
        model="any", prompt="def add(a, b):", max_tokens=12, temperature=0, stream=True)]
    assert "".join(pieces).strip()
    e = c.completions.create(model="any", prompt="Hello", max_tokens=2, echo=True)
    assert e.choices[0].text.startswith("Hello")


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from continuations import reference_continuations  # noqa: E402


@check("continuations: llama.cpp's text after the prompt, streamed and not (SPM vocabularies)")
def continuations(binary):
    for path, cases in reference_continuations():
        s = Server(binary, path, "--parallel", "1", key=KEY)
        try:
            c = s.client()
            for prompt, n, want in cases:
                if n == 0:
                    continue
                r = c.completions.create(model="m", prompt=prompt, max_tokens=n, temperature=0)
                assert r.choices[0].text == want, (path, prompt, r.choices[0].text, want)
                streamed = "".join(ch.choices[0].text for ch in c.completions.create(
                    model="m", prompt=prompt, max_tokens=n, temperature=0, stream=True))
                assert streamed == want, (path, prompt, streamed, want)
        finally:
            assert s.stop() == 0


@check("errors: wrong key 401, bad requests 400 with OpenAI error bodies")
def errors(s):
    try:
        s.client(key="wrong").chat.completions.create(model="any", messages=CHAT, max_tokens=2)
        raise AssertionError("expected 401")
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    try:
        s.client(key="wrong").models.list()
        raise AssertionError("expected 401")
    except openai.AuthenticationError:
        pass
    for bad in [dict(temperature=5), dict(n=9), dict(n=0), dict(max_tokens=0), dict(top_p=0),
                dict(stop=["a", "b", "c", "d", "e"])]:
        try:
            s.client().chat.completions.create(model="any", messages=CHAT, **bad)
            raise AssertionError(f"expected 400 for {bad}")
        except openai.BadRequestError as e:
            assert e.status_code == 400 and e.body["message"], e.body
    try:
        s.client().chat.completions.create(model="any", messages=[])
        raise AssertionError("expected 400")
    except openai.BadRequestError:
        pass
    try:
        s.client().completions.create(model="any", prompt="x " * 2000, max_tokens=2)
        raise AssertionError("expected 400 for a prompt longer than the context")
    except openai.BadRequestError as e:
        assert e.code == "context_length_exceeded", e.body
    # Raw bodies: not JSON, wrong types, too large, unknown endpoint, wrong method.
    for body in [b"{not json", b'{"messages": 5}', b'{"prompt": {"a": 1}}', b"\xff\xfe"]:
        code, text, _ = s.post_raw("/v1/chat/completions", body)
        assert code == 400 and json.loads(text)["error"]["type"] == "invalid_request_error", text
    code, text, _ = s.post_raw("/v1/completions", b'{"prompt": "' + b"a" * (5 << 20) + b'"}')
    assert code == 413 and "error" in json.loads(text), (code, text[:200])
    code, _, _ = s.post_raw("/v1/nothing", b"{}")
    assert code == 404
    try:
        s.get("/v1/chat/completions")
        raise AssertionError("expected 405")
    except urllib.error.HTTPError as e:
        assert e.code == 405
    # /health needs no key; it and the server survived all of the above.
    assert json.loads(s.get("/health", key="")[1])["status"] == "ok"


PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        "role": {"enum": ["engineer", "manager", "designer"]},
    },
    "required": ["name", "age", "languages", "role"],
    "additionalProperties": False,
}
PEOPLE = ["a Rust engineer from Oslo", "a retired designer", "a young manager",
          "Ada Lovelace", "Linus Torvalds", "a chef who codes", "a student of physics",
          "the author of a C compiler", "someone who speaks four languages", "a robot"]


@check("structured output: json_schema on 10 prompts validates, parse(), json_object, grammar")
def structured(s):
    import jsonschema
    import pydantic
    c = s.client()
    fmt = {"type": "json_schema",
           "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True}}
    for i, who in enumerate(PEOPLE):
        r = c.chat.completions.create(
            model="any", max_tokens=120, temperature=0.7, seed=i, response_format=fmt,
            messages=[{"role": "user", "content": f"Describe {who} as JSON."}])
        assert r.choices[0].finish_reason == "stop", r
        jsonschema.validate(json.loads(r.choices[0].message.content), PERSON_SCHEMA)

    class Colour(pydantic.BaseModel):
        name: str
        hex_code: str
        warm: bool
    parsed = c.chat.completions.parse(
        model="any", max_tokens=80, temperature=0, response_format=Colour,
        messages=[{"role": "user", "content": "Describe the colour orange."}])
    assert isinstance(parsed.choices[0].message.parsed, Colour), parsed

    stream = c.chat.completions.create(
        model="any", max_tokens=100, temperature=0, stream=True,
        response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "Give the three primary colours as JSON."}])
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    assert isinstance(json.loads(text), dict), text

    r = c.completions.create(model="any", prompt="The answer is", max_tokens=20, temperature=1,
                             extra_body={"grammar": 'root ::= ("yes" | "no") "." '})
    assert r.choices[0].text in ("yes.", "no."), r
    # A grammar that never finishes runs to max_tokens.
    r = c.completions.create(model="any", prompt="Counting:", max_tokens=8, temperature=0,
                             extra_body={"grammar": 'root ::= "1" [0-9]* root'})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 8, r
    assert re.fullmatch(r"1[0-9]*", r.choices[0].text), r


@check("structured output: bad schemas, formats and grammars are 400s naming the field")
def structured_errors(s):
    c = s.client()
    cases = [
        (dict(response_format={"type": "json_schema",
                               "json_schema": {"name": "x", "schema": {"type": "strin"}}}),
         "response_format"),
        (dict(response_format={"type": "yaml"}), "response_format"),
        (dict(response_format={"type": "json_schema"}), "response_format"),
        (dict(extra_body={"grammar": "root ::= missing"}), "grammar"),
        (dict(extra_body={"grammar": "root ::= \"a\"", "json_schema": {}}), "json_schema"),
    ]
    for kw, param in cases:
        try:
            c.chat.completions.create(model="any", messages=CHAT, max_tokens=4, **kw)
            raise AssertionError(f"expected 400 for {kw}")
        except openai.BadRequestError as e:
            assert e.body["param"] == param and e.body["message"], (kw, e.body)


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The current time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                   "required": ["zone"]}}}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris right now?"}]


RESPONSES_WEATHER_TOOL = {"type": "function", "name": "get_weather",
                          "description": "The current weather in a city.",
                          "parameters": WEATHER_TOOL["function"]["parameters"]}


@check("responses API: plain, streamed, a function call round trip (items and previous_response_id)")
def responses(s):
    c = s.client()
    r = c.responses.create(model="any", instructions="You answer in one word.",
                           input="What is the capital of France?", temperature=0,
                           max_output_tokens=16)
    assert r.object == "response" and r.status == "completed" and "Paris" in r.output_text, r
    assert r.usage.input_tokens > 10 and r.usage.output_tokens > 0, r.usage
    events = list(c.responses.create(model="any", instructions="You answer in one word.",
                                     input="What is the capital of France?", temperature=0,
                                     max_output_tokens=16, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"], kinds
    assert kinds[-1] == "response.completed", kinds
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == r.output_text == events[-1].response.output_text, (deltas, r.output_text)
    assert [e.sequence_number for e in events] == list(range(len(events))), kinds
    # A function call, its output sent back with previous_response_id; the answer uses it.
    call = c.responses.create(model="any", input=ASK_WEATHER[0]["content"],
                              tools=[RESPONSES_WEATHER_TOOL], tool_choice="required",
                              temperature=0, max_output_tokens=80)
    calls = [o for o in call.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather", call.output
    assert "paris" in json.loads(calls[0].arguments)["city"].lower(), calls
    result = {"type": "function_call_output", "call_id": calls[0].call_id,
              "output": json.dumps({"city": "Paris", "temperature_c": 31, "sky": "sunny"})}
    answer_rules = ("You are a helpful assistant. When a tool result arrives, answer the user "
                    "in one sentence using it.")
    followed = c.responses.create(model="any", previous_response_id=call.id, input=[result],
                                  instructions=answer_rules, tools=[RESPONSES_WEATHER_TOOL],
                                  tool_choice="none", temperature=0, max_output_tokens=60)
    assert "31" in followed.output_text, followed
    # The same round trip with the items sent back by the client, streamed.
    items = [{"role": "user", "content": ASK_WEATHER[0]["content"]}] + \
        [o.model_dump(exclude_none=True) for o in call.output] + [result]
    with c.responses.stream(model="any", input=items, instructions=answer_rules,
                            tools=[RESPONSES_WEATHER_TOOL], tool_choice="none", temperature=0,
                            max_output_tokens=60) as stream:
        final = stream.get_final_response()
    assert final.output_text == followed.output_text, (final.output_text, followed.output_text)
    # A streamed call: its arguments arrive as deltas.
    events = list(c.responses.create(model="any", input=ASK_WEATHER[0]["content"],
                                     tools=[RESPONSES_WEATHER_TOOL], tool_choice="required",
                                     temperature=0, max_output_tokens=80, stream=True))
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(args) == json.loads(calls[0].arguments), args
    try:
        c.responses.create(model="any", previous_response_id="resp_nope", input="Hi")
        raise AssertionError("an unknown previous response was accepted")
    except openai.NotFoundError:
        pass


def streamed_tool_calls(stream):
    """Accumulates streamed tool-call deltas the way OpenAI's clients do."""
    calls, finish, text = {}, None, ""
    for ch in stream:
        if not ch.choices:
            continue
        c = ch.choices[0]
        text += c.delta.content or ""
        for d in c.delta.tool_calls or []:
            call = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            call["id"] = d.id or call["id"]
            call["name"] += d.function.name or ""
            call["arguments"] += d.function.arguments or ""
        finish = c.finish_reason or finish
    return [calls[i] for i in sorted(calls)], finish, text


@check("tools: a call round trip, streamed and not; required and named choices")
def tools(s):
    c = s.client()
    tools = [WEATHER_TOOL, TIME_TOOL]
    r = c.chat.completions.create(model="any", messages=ASK_WEATHER, tools=tools,
                                  temperature=0, max_tokens=80)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", r
    call = ch.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather", r
    assert "paris" in json.loads(call.function.arguments)["city"].lower(), r
    calls, finish, _ = streamed_tool_calls(c.chat.completions.create(
        model="any", messages=ASK_WEATHER, tools=tools, temperature=0, max_tokens=80,
        stream=True))
    assert finish == "tool_calls" and len(calls) == 1, (calls, finish)
    assert calls[0]["name"] == "get_weather" and calls[0]["id"], calls
    assert json.loads(calls[0]["arguments"]) == json.loads(call.function.arguments), calls
    # The round trip: the call and its result go back; the model answers from the result
    # (tool_choice none: the 0.5B model, offered tools, keeps calling them).
    history = [{"role": "system", "content": "You are a helpful assistant. When a tool result "
                "arrives, answer the user in one sentence using it."}] + ASK_WEATHER + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id,
         "content": json.dumps({"city": "Paris", "temperature_c": 31, "sky": "sunny"})}]
    r = c.chat.completions.create(model="any", messages=history, tools=tools, temperature=0,
                                  tool_choice="none", max_tokens=60)
    answer = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop" and "31" in answer, r
    # required: a call even when the question does not need one; named: that function.
    for choice, name in [("required", None),
                         ({"type": "function", "function": {"name": "get_time"}}, "get_time")]:
        for stream in (False, True):
            kw = dict(model="any", messages=[{"role": "user", "content": "Say hello."}],
                      tools=tools, tool_choice=choice, temperature=0.8, seed=1, max_tokens=80)
            if stream:
                calls, finish, _ = streamed_tool_calls(
                    c.chat.completions.create(stream=True, **kw))
            else:
                m = c.chat.completions.create(**kw).choices[0]
                finish = m.finish_reason
                calls = [{"name": t.function.name, "arguments": t.function.arguments}
                         for t in m.message.tool_calls]
            assert finish == "tool_calls" and len(calls) == 1, (choice, calls, finish)
            assert calls[0]["name"] in (name or ("get_weather", "get_time")), calls
            args = json.loads(calls[0]["arguments"])
            assert ("city" in args) if calls[0]["name"] == "get_weather" else ("zone" in args)
    # none: tools are not offered, the reply is text.
    r = c.chat.completions.create(model="any", messages=ASK_WEATHER, tools=tools,
                                  tool_choice="none", temperature=0, max_tokens=20)
    assert r.choices[0].finish_reason != "tool_calls" and not r.choices[0].message.tool_calls
    for kw, param in [
        (dict(tools=tools, tool_choice={"type": "function", "function": {"name": "nope"}}),
         "tool_choice"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=[{"type": "function", "function": {"name": "has space"}}]), "tools"),
    ]:
        try:
            c.chat.completions.create(model="any", messages=ASK_WEATHER, max_tokens=4, **kw)
            raise AssertionError(f"expected 400 for {kw}")
        except openai.BadRequestError as e:
            assert e.body["param"] == param, (kw, e.body)


@check("ollama: chat and generate (streamed and not), list, show, ps, version, format, tools")
def ollama_api(s):
    import ollama
    c = ollama.Client(host=s.url, headers={"Authorization": f"Bearer {KEY}"})
    name = c.list().models[0].model
    r = c.chat(model=name, messages=CHAT, options={"temperature": 0, "num_predict": 24})
    assert r.done and r.message.role == "assistant" and r.message.content.strip(), r
    assert r.eval_count and 0 < r.eval_count <= 24 and r.prompt_eval_count > 10, r
    assert r.total_duration >= r.eval_duration > 0 and r.done_reason in ("stop", "length"), r
    parts = list(c.chat(model=name, messages=CHAT, stream=True,
                        options={"temperature": 0, "num_predict": 24}))
    assert all(not p.done for p in parts[:-1]) and parts[-1].done, parts
    assert "".join(p.message.content for p in parts) == r.message.content, parts
    g = c.generate(model=name, prompt="Name a primary colour.", options={"temperature": 0,
                   "num_predict": 16})
    assert g.done and g.response.strip() and g.eval_count <= 16, g
    pieces = list(c.generate(model=name, prompt="def add(a, b):", raw=True, stream=True,
                             options={"temperature": 0, "num_predict": 12}))
    assert pieces[-1].done and "".join(p.response for p in pieces).strip(), pieces
    j = c.chat(model=name, format="json", options={"temperature": 0, "num_predict": 60},
               messages=[{"role": "user", "content": "Three primary colours as JSON."}])
    assert isinstance(json.loads(j.message.content), dict), j
    schema = {"type": "object", "properties": {"colour": {"type": "string"}},
              "required": ["colour"], "additionalProperties": False}
    j = c.chat(model=name, format=schema, options={"temperature": 0, "num_predict": 60},
               messages=[{"role": "user", "content": "Name one colour."}])
    assert set(json.loads(j.message.content)) == {"colour"}, j
    t = c.chat(model=name, messages=ASK_WEATHER, tools=[WEATHER_TOOL],
               options={"temperature": 0, "num_predict": 80})
    assert t.message.tool_calls and t.message.tool_calls[0].function.name == "get_weather", t
    assert "city" in t.message.tool_calls[0].function.arguments, t
    shown = c.show(name)
    assert shown.modelinfo["general.architecture"] == "qwen2", shown.modelinfo
    assert "completion" in shown.capabilities and "tools" in shown.capabilities, shown
    assert shown.details.format == "gguf" and shown.details.quantization_level == "Q4_K_M"
    assert c.ps().models[0].model == name
    code, text = s.get("/api/version")
    assert json.loads(text)["version"]
    try:
        c.chat(model="no-such-model", messages=CHAT)
        raise AssertionError("expected 404")
    except ollama.ResponseError as e:
        assert e.status_code == 404 and "not found" in e.error, e
    code, text, _ = s.post_raw("/api/chat", b"{broken")
    assert code == 400 and "error" in json.loads(text), text
    code, text, _ = s.post_raw("/api/chat", json.dumps(
        {"model": name, "messages": CHAT, "options": {"top_p": 2}}).encode())
    assert code == 400 and isinstance(json.loads(text)["error"], str), text


@check("logprobs: chat and completions, streamed and not, top_logprobs, limits")
def logprobs(s):
    import math
    c = s.client()
    r = c.chat.completions.create(model="any", messages=CHAT, max_tokens=12, temperature=0,
                                  logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content) == r.choices[0].message.content, r
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3 and bytes(t.bytes).decode() == t.token
        assert t.top_logprobs[0].token == t.token, t  # greedy: the most likely token
        assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5
        assert sum(math.exp(a.logprob) for a in t.top_logprobs) <= 1.0001
    chunks = [ch for ch in c.chat.completions.create(
        model="any", messages=CHAT, max_tokens=12, temperature=0, logprobs=True,
        top_logprobs=3, stream=True) if ch.choices]
    streamed = [t for ch in chunks if ch.choices[0].logprobs
                for t in ch.choices[0].logprobs.content]
    assert [(t.token, round(t.logprob, 4)) for t in streamed] == \
        [(t.token, round(t.logprob, 4)) for t in content], (streamed, content)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert text == r.choices[0].message.content
    comp = c.completions.create(model="any", prompt="def add(a, b):", max_tokens=8,
                                temperature=0, logprobs=2)
    lp = comp.choices[0].logprobs
    assert "".join(lp.tokens) == comp.choices[0].text and len(lp.token_logprobs) == 8, lp
    assert all(len(t) == 2 for t in lp.top_logprobs) and lp.text_offset[0] == 0, lp
    for bad in [dict(logprobs=True, top_logprobs=21), dict(top_logprobs=2)]:
        try:
            c.chat.completions.create(model="any", messages=CHAT, max_tokens=2, **bad)
            raise AssertionError(f"expected 400 for {bad}")
        except openai.BadRequestError as e:
            assert e.body["param"] == "top_logprobs", e.body


@check("embeddings: /v1/embeddings (batch, base64, token ids), Ollama's embed; /tokenize")
def embeddings(s):
    import base64
    import struct
    import ollama
    c = s.client()
    texts = ["The cat sat on the mat.", "A cat was sitting on the mat.",
             "Quarterly revenue grew by eight percent in Asia."]
    r = c.embeddings.create(model="any", input=texts)
    vecs = [d.embedding for d in sorted(r.data, key=lambda d: d.index)]
    assert len(vecs) == 3 and len(vecs[0]) == 896 and r.usage.prompt_tokens > 10, r.usage
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))
    assert abs(dot(vecs[0], vecs[0]) - 1) < 1e-3
    assert dot(vecs[0], vecs[1]) > dot(vecs[0], vecs[2]), [dot(vecs[0], v) for v in vecs]
    one = c.embeddings.create(model="any", input=texts[0]).data[0].embedding
    assert max(abs(a - b) for a, b in zip(one, vecs[0])) < 1e-5
    code, text, _ = s.post_raw("/v1/embeddings", json.dumps(
        {"input": texts[0], "encoding_format": "base64"}).encode())
    raw = base64.b64decode(json.loads(text)["data"][0]["embedding"])
    assert max(abs(a - b) for a, b in zip(struct.unpack(f"<{len(raw) // 4}f", raw), one)) < 1e-6
    ids = s.client().embeddings.create(model="any", input=[[9707, 11, 1879]]).data[0].embedding
    assert len(ids) == 896
    # llama-server's /tokenize and /detokenize round trip.
    code, text, _ = s.post_raw("/tokenize", json.dumps(
        {"content": "Hello<|im_end|> wörld", "with_pieces": True}).encode())
    pieces = json.loads(text)["tokens"]
    assert code == 200 and pieces[0] == {"id": 9707, "piece": "Hello"}, pieces
    assert any(p["piece"] == "<|im_end|>" for p in pieces), pieces
    code, text, _ = s.post_raw("/detokenize", json.dumps(
        {"tokens": [p["id"] for p in pieces]}).encode())
    assert json.loads(text)["content"] == "Hello wörld", text
    code, _, _ = s.post_raw("/detokenize", b'{"tokens": [99999999]}')
    assert code == 400
    o = ollama.Client(host=s.url, headers={"Authorization": f"Bearer {KEY}"})
    e = o.embed(model="any", input=texts[:2])
    assert len(e.embeddings) == 2 and max(abs(a - b) for a, b in zip(e.embeddings[0], one)) < 1e-5
    legacy = o.embeddings(model="any", prompt=texts[0])
    assert max(abs(a - b) for a, b in zip(legacy.embedding, one)) < 1e-5
    for body, param in [({"input": ""}, "input"), ({"input": 5}, "input"),
                        ({"input": "x", "dimensions": 3}, "dimensions"),
                        ({"input": "x " * 3000}, "input")]:
        code, text, _ = s.post_raw("/v1/embeddings", json.dumps(body).encode())
        assert code == 400 and json.loads(text)["error"]["param"] == param, (body, text)


@check("langchain-openai: with_structured_output (3 methods) and bind_tools")
def langchain(s):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.environ["KOLIBRI_LANGCHAIN_PATH"])
    r = subprocess.run([sys.executable, os.path.join(here, "test_langchain.py"), s.url, KEY],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "langchain: ok" in r.stdout, r.stdout + r.stderr


@check("n: 3 choices over one prompt, streamed and not; n above the slots is a 400")
def choices(s):
    c = s.client()
    r = c.chat.completions.create(model="any", messages=CHAT, max_tokens=16, temperature=1.0,
                                  seed=7, n=3)
    assert [ch.index for ch in r.choices] == [0, 1, 2], r
    texts = [ch.message.content for ch in r.choices]
    assert all(t.strip() for t in texts) and len(set(texts)) > 1, texts
    assert 3 <= r.usage.completion_tokens <= 48 and r.usage.prompt_tokens > 10, r.usage
    got = {0: "", 1: "", 2: ""}
    finished = set()
    for ch in c.chat.completions.create(model="any", messages=CHAT, max_tokens=16,
                                        temperature=1.0, seed=7, n=3, stream=True):
        for choice in ch.choices:
            got[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finished.add(choice.index)
    assert finished == {0, 1, 2} and [got[i] for i in range(3)] == texts, (got, texts)
    comp = c.completions.create(model="any", prompt="def add(a, b):", max_tokens=8,
                                temperature=1.0, seed=3, n=2)
    assert len(comp.choices) == 2 and comp.usage.completion_tokens <= 16, comp
    try:
        c.chat.completions.create(model="any", messages=CHAT, max_tokens=4, n=5)
        raise AssertionError("expected 400 for n above the 4 slots")
    except openai.BadRequestError as e:
        assert e.body["param"] == "n", e.body


def run_page_test(s, shot_name, *extra):
    here = os.path.dirname(os.path.abspath(__file__))
    shot = os.path.join(here, "..", "..", "target", "artifacts", shot_name)
    os.makedirs(os.path.dirname(shot), exist_ok=True)
    env = dict(os.environ, NODE_PATH=os.environ["KOLIBRI_NODE_PATH"])
    r = subprocess.run(["node", os.path.join(here, "test_page.cjs"), s.url, KEY, shot, *extra],
                       env=env, capture_output=True, text=True, timeout=300)
    return r, shot


@check("chat page: loads without console errors in headless Chromium, streams an answer")
def chat_page(s):
    r, shot = run_page_test(s, "chat-page.png")
    assert r.returncode == 0 and "page: ok" in r.stdout, r.stdout + r.stderr
    assert os.path.getsize(shot) > 1000


@check("cancellation: a client that disconnects mid-stream frees its slot")
def cancellation(s):
    before = s.metric("requests_cancelled_total")
    stream = s.client().completions.create(model="any", prompt="Once upon a time",
                                           max_tokens=500, temperature=0.8, stream=True)
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    deadline = time.time() + 30
    while s.metric("requests_cancelled_total") == before:
        assert time.time() < deadline, "the abandoned request was not cancelled"
        time.sleep(0.2)
    assert s.metric("slots_busy") == 0


@check("metrics: Prometheus text with request and token counters")
def metrics(s):
    _, text = s.get("/metrics")
    for name in ["requests_total", "completion_tokens_total", "prompt_tokens_total",
                 "queue_depth", "completion_tokens_per_second", "http_client_errors_total"]:
        assert re.search(rf"^# TYPE kolibri_{name} (counter|gauge)$", text, re.M), name
    assert s.metric("completion_tokens_total") > 0 and s.metric("http_client_errors_total") > 0
    try:
        s.get("/metrics", key="wrong")
        raise AssertionError("expected 401")
    except urllib.error.HTTPError as e:
        assert e.code == 401


@check("no chat template: chat is a clear 400, completions work")
def no_template(s):
    try:
        s.client().chat.completions.create(model="any", messages=CHAT, max_tokens=2)
        raise AssertionError("expected 400")
    except openai.BadRequestError as e:
        assert "chat template" in e.body["message"], e.body
    r = s.client().completions.create(model="any", prompt="The sky is", max_tokens=4)
    assert r.choices[0].text


@check("queue full: 429 with Retry-After, then the queue drains")
def queue_full(s):
    def long_request():
        return s.client().completions.create(model="any", prompt="Once upon a time",
                                             max_tokens=40, temperature=0)

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(long_request) for _ in range(6)]
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result().choices[0].finish_reason)
            except openai.RateLimitError as e:
                assert e.status_code == 429 and e.response.headers.get("retry-after") == "1"
                outcomes.append(429)
    assert outcomes.count(429) >= 1 and outcomes.count("length") >= 2, outcomes


def streamed_tokens(s, prompt, max_tokens):
    """One streamed completion; the number of tokens it generated (from its usage chunk)."""
    usage = None
    for chunk in s.client().completions.create(model="any", prompt=prompt, max_tokens=max_tokens,
                                               temperature=0, stream=True,
                                               stream_options={"include_usage": True}):
        usage = chunk.usage or usage
    return usage.completion_tokens


@check("queued: --parallel 1, 8 clients: aggregate tokens/s within 15% of a lone client's")
def queued_throughput(s):
    prompts = [f"Write a short story about a {animal} who learns to sing." for animal in
               ("fox", "crow", "mole", "hare", "wren", "newt", "lynx", "seal", "toad")]
    streamed_tokens(s, "Warm up.", 4)

    t = time.time()
    lone_tokens = streamed_tokens(s, prompts[0], 48)
    lone_rate = lone_tokens / (time.time() - t)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        t = time.time()
        counts = list(pool.map(lambda p: streamed_tokens(s, p, 48), prompts[1:]))
        queued_rate = sum(counts) / (time.time() - t)
    print(f"     queued: lone {lone_rate:.1f} tokens/s, 8 queued clients {queued_rate:.1f} "
          f"tokens/s ({queued_rate / lone_rate:.2f}x)", flush=True)
    assert queued_rate >= 0.85 * lone_rate, (lone_rate, queued_rate)


@check("load: 16 clients x 20 requests, 0 errors, RSS stays flat")
def load(s):
    c = s.client()
    c.chat.completions.create(model="any", messages=CHAT, max_tokens=8)
    rss_first = s.rss_kib()
    errors = []

    def client(i):
        for j in range(20):
            try:
                msgs = [{"role": "user", "content": f"Client {i} request {j}: say a number."}]
                if j % 2:
                    r = c.chat.completions.create(model="any", messages=msgs, max_tokens=6,
                                                  temperature=0.7)
                    assert r.choices[0].finish_reason in ("stop", "length")
                else:
                    text = "".join(ch.choices[0].delta.content or "" for ch in
                                   c.chat.completions.create(model="any", messages=msgs,
                                                             max_tokens=6, stream=True)
                                   if ch.choices)
                    assert isinstance(text, str)
            except Exception as e:  # noqa: BLE001 - every failure counts
                errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    t = time.time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rss_after = s.rss_kib()
    print(f"     load: {time.time() - t:.1f} s, RSS after first request {rss_first >> 10} MiB, "
          f"after 320 requests {rss_after >> 10} MiB", flush=True)
    assert not errors, errors[:5]
    assert rss_after <= rss_first + max(32 << 10, rss_first // 10), (rss_first, rss_after)


@check("slots: 501 without --slot-save-path")
def slots_off(s):
    code, text, _ = s.post_raw("/slots/0?action=save", b'{"filename": "x.bin"}')
    assert code == 501 and "--slot-save-path" in json.loads(text)["error"]["message"], text


def slot(s, action, body=None, slot_id=0):
    payload = json.dumps(body).encode() if body is not None else b""
    code, text, _ = s.post_raw(f"/slots/{slot_id}?action={action}", payload)
    return code, json.loads(text)


def slots(binary, model):
    """A slot saved, restored into a restarted server (the same prompt then reuses it and
    continues identically), erased; bad names, files, ids and actions refused."""
    import tempfile

    name = "slots: save, restore after a restart, erase; bad requests refused"
    t = time.time()
    ok = True
    with tempfile.TemporaryDirectory() as d:
        try:
            prompt = "def bubble_sort(items):\n    "
            first = Server(binary, model, "--parallel", "1", "--slot-save-path", d, key=KEY)
            try:
                r1 = first.client().completions.create(model="any", prompt=prompt,
                                                       max_tokens=12, temperature=0)
                code, saved = slot(first, "save", {"filename": "p.bin"})
                assert code == 200 and saved["n_saved"] >= r1.usage.prompt_tokens, saved
                assert os.path.getsize(os.path.join(d, "p.bin")) == saved["n_written"]
            finally:
                first.stop()
            second = Server(binary, model, "--parallel", "1", "--slot-save-path", d, key=KEY)
            try:
                code, restored = slot(second, "restore", {"filename": "p.bin"})
                assert code == 200 and restored["n_restored"] == saved["n_saved"], restored
                r2 = second.client().completions.create(model="any", prompt=prompt,
                                                        max_tokens=12, temperature=0)
                cached = r2.usage.prompt_tokens_details.cached_tokens
                assert cached == r2.usage.prompt_tokens - 1, r2.usage
                assert r2.choices[0].text == r1.choices[0].text
                for body, action, slot_id in [({"filename": "../p.bin"}, "save", 0),
                                              ({"filename": "missing.bin"}, "restore", 0),
                                              ({}, "save", 0), (None, "frobnicate", 0),
                                              ({"filename": "p.bin"}, "restore", 7)]:
                    code, err = slot(second, action, body, slot_id)
                    assert code == 400 and err["error"]["message"], (action, body, code, err)
                with open(os.path.join(d, "p.bin"), "r+b") as f:
                    f.seek(100)
                    f.write(b"\xff\xff")
                code, err = slot(second, "restore", {"filename": "p.bin"})
                assert code == 400 and "corrupted" in err["error"]["message"], err
                code, erased = slot(second, "erase")
                assert code == 200 and erased["n_erased"] >= saved["n_saved"], erased
            finally:
                second.stop()
        except Exception:
            ok = False
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    RESULTS.append((name, ok))
    if ok:
        print(f"ok   {name} ({time.time() - t:.1f} s)", flush=True)


def chat_past_context(binary, model, n_ctx, n_tokens):
    """A chat driven to `n_tokens` of history in an `n_ctx` context: with --context-shift every
    turn is answered; without it the long turn gets 400 context_length_exceeded."""
    name = f"context: a chat of {n_tokens} tokens in a {n_ctx} context, with and without shift"
    t = time.time()
    ok = True
    shifted = Server(binary, model, "--parallel", "1", "-c", str(n_ctx), "--context-shift",
                     "--keep", "32", key=KEY)
    plain = Server(binary, model, "--parallel", "1", "-c", str(n_ctx), key=KEY)
    try:
        messages = [{"role": "system", "content": "You are a terse assistant."}]
        # The history's length: the first two turns measure what a turn adds (later prompts
        # are cut to fit, so their usage no longer counts the whole history).
        used, turn, sizes = 0, 0, []
        while used < n_tokens:
            turn += 1
            filler = " ".join(f"item{turn}-{i}" for i in range(max(8, n_ctx // 16)))
            messages.append({"role": "user", "content": f"Turn {turn}. Notes: {filler}. "
                                                        f"Reply with one word."})
            r = shifted.client().chat.completions.create(model="any", messages=messages,
                                                         max_tokens=8, temperature=0)
            assert r.choices[0].message.content is not None, r
            assert r.choices[0].finish_reason in ("stop", "length"), r
            messages.append({"role": "assistant", "content": r.choices[0].message.content})
            sizes.append(r.usage.prompt_tokens)
            used = sizes[0] + (turn - 1) * (sizes[1] - sizes[0] if turn > 1 else 0)
        assert turn > 2 and used >= n_tokens and sizes[-1] < n_ctx, (turn, used, sizes)
        try:
            plain.client().chat.completions.create(model="any", messages=messages, max_tokens=8)
            raise AssertionError("expected 400 context_length_exceeded")
        except openai.BadRequestError as e:
            assert e.code == "context_length_exceeded", e.body
        assert shifted.metric("requests_total") >= turn
    except Exception:
        ok = False
        print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    finally:
        shifted.stop()
        plain.stop()
    RESULTS.append((name, ok))
    if ok:
        print(f"ok   {name} ({time.time() - t:.1f} s, {turn} turns)", flush=True)


def host_port(s):
    m = re.match(r"http://([\d.]+):(\d+)", s.url)
    return m.group(1), int(m.group(2))


def closed_by_server(sock, within):
    """Whether the server closes `sock` (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except OSError:
        return False


@check("hostile clients: idle and byte-a-second connections cannot starve a request")
def slow_clients(binary, model):
    import socket

    s = Server(binary, model, "--parallel", "2", "--conn-timeout", "2", key=KEY)
    stop = threading.Event()
    try:
        client = s.client()

        def timed():
            t = time.time()
            client.completions.create(model="m", prompt="Hello", max_tokens=8, temperature=0)
            return time.time() - t

        timed()
        unloaded = min(timed() for _ in range(3))
        addr = host_port(s)
        idle = [socket.create_connection(addr) for _ in range(200)]

        def trickle():
            request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"
            while not stop.is_set():
                try:
                    with socket.create_connection(addr) as sock:
                        for byte in request:
                            if stop.is_set():
                                return
                            sock.sendall(bytes([byte]))
                            time.sleep(1.0)
                except OSError:
                    pass  # cut off by the server: come back, as an attacker would

        trickles = [threading.Thread(target=trickle, daemon=True) for _ in range(20)]
        for t in trickles:
            t.start()
        time.sleep(0.5)
        loaded = min(timed() for _ in range(3))
        print(f"     slow clients: unloaded {unloaded:.3f} s, with 200 idle and 20 "
              f"byte-a-second connections {loaded:.3f} s (x{loaded / unloaded:.2f})")
        assert loaded < 2 * unloaded + 0.1, (unloaded, loaded)
        # The idle connections never sent a header: closed at the header deadline.
        closed = sum(closed_by_server(sock, 4.0) for sock in idle)
        assert closed == len(idle), f"{closed} of {len(idle)} idle connections closed"
        # A body that trickles in gets 408 at the deadline.
        with socket.create_connection(addr) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Authorization: Bearer " + KEY.encode() + b"\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{")
            sock.settimeout(6)
            reply = sock.recv(4096).decode(errors="replace")
            assert reply.startswith("HTTP/1.1 408"), reply[:200]
    finally:
        stop.set()
        s.stop()


@check("connection cap: connections past --max-connections are closed; requests go on")
def connection_cap(binary, model):
    import socket

    s = Server(binary, model, "--parallel", "1", "--max-connections", "4", "--conn-timeout",
               "2", key=KEY)
    try:
        addr = host_port(s)
        held = [socket.create_connection(addr) for _ in range(4)]
        time.sleep(0.3)
        extra = socket.create_connection(addr)
        assert closed_by_server(extra, 1.0), "a connection past the cap stayed open"
        # The held ones time out (they sent nothing), and the server serves again.
        assert all(closed_by_server(sock, 4.0) for sock in held)
        out = s.client().completions.create(model="m", prompt="Hi", max_tokens=4)
        assert out.choices[0].text is not None
        assert s.metric("connections_refused_total") >= 1
    finally:
        s.stop()


@check("graceful stop: SIGTERM lets a request in flight finish, then exit 0")
def graceful_stop(binary, model):
    s = Server(binary, model, "--parallel", "1", key=KEY)
    result = {}

    def generate():
        stream = s.client().completions.create(model="m", prompt="def merge_sort(a):",
                                               max_tokens=48, temperature=0, stream=True)
        text, finish = "", None
        for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].text or ""
                finish = chunk.choices[0].finish_reason or finish
                result.setdefault("first", time.time())
        result.update(text=text, finish=finish)

    worker = threading.Thread(target=generate)
    worker.start()
    while "first" not in result and worker.is_alive():
        time.sleep(0.01)
    s.proc.terminate()
    worker.join(timeout=60)
    code = s.proc.wait(timeout=60)
    assert code == 0, code
    assert result.get("finish") in ("length", "stop"), result


HOSTILE_TEMPLATES = {
    "an endless loop": "{% for i in range(100000000) %}{% for j in range(100000000) %}"
                       "{{ i }}{% endfor %}{% endfor %}",
    "deep recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "huge output": "{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                   "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "an undefined function": "{{ no_such_function(messages) }}",
}


TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "templates")


def streamed_reply(stream):
    """A streamed chat reply gathered: (reasoning, content, calls, finish)."""
    chunks = list(stream)
    reasoning = "".join(getattr(ch.choices[0].delta, "reasoning_content", None) or ""
                        for ch in chunks if ch.choices)
    calls, finish, content = streamed_tool_calls(iter(chunks))
    return reasoning, content, calls, finish


@check("reasoning: thinking apart from the answer for openai and ollama clients, streamed and "
       "not; enable_thinking, budgets, unfinished thinking kept")
def reasoning_tags(binary, model):
    import ollama
    s = Server(binary, model, "--parallel", "2", "--reasoning-budget", "6",
               "--chat-template-file", os.path.join(TEMPLATES, "thinking-qwen.jinja"), key=KEY)
    try:
        c = s.client()
        # The template opens the thinking; a grammar makes the model think, close, answer.
        grammar = r'root ::= "Colours" [a-z ]{3,20} "\n</think>\n\n" "Red" [a-z ]{3,20}'
        kw = dict(model="any", messages=CHAT, max_tokens=60, temperature=0)
        r = c.chat.completions.create(**kw, extra_body={"grammar": grammar})
        m = r.choices[0].message
        raw = c.chat.completions.create(**kw, extra_body={"grammar": grammar,
                                                          "reasoning_format": "none"})
        thinking, answer = raw.choices[0].message.content.split("\n</think>\n\n")
        assert thinking.startswith("Colours") and answer.startswith("Red"), raw
        assert (m.reasoning_content, m.content) == (thinking.strip(), answer), (m, raw)
        streamed = streamed_reply(c.chat.completions.create(**kw, stream=True,
                                                            extra_body={"grammar": grammar}))
        assert streamed[:2] == (m.reasoning_content, m.content), streamed
        # The next turn hands the thinking back to the template.
        turn = CHAT + [{"role": "assistant", "content": m.content,
                        "reasoning_content": m.reasoning_content},
                       {"role": "user", "content": "And three more?"}]
        plain = CHAT + [{"role": "assistant", "content": m.content},
                        {"role": "user", "content": "And three more?"}]
        with_thought = c.chat.completions.create(model="any", messages=turn, max_tokens=1)
        without = c.chat.completions.create(model="any", messages=plain, max_tokens=1)
        assert with_thought.usage.prompt_tokens > without.usage.prompt_tokens + 3
        # enable_thinking reaches the template: the prompt closes the thinking itself, and
        # the whole reply is answer. A budget of 0 does the same.
        on = c.chat.completions.create(**kw)
        off = c.chat.completions.create(**kw, extra_body={
            "chat_template_kwargs": {"enable_thinking": False}})
        zero = c.chat.completions.create(**kw, extra_body={"reasoning_budget_tokens": 0})
        assert off.usage.prompt_tokens > on.usage.prompt_tokens, (on.usage, off.usage)
        assert zero.usage.prompt_tokens == off.usage.prompt_tokens
        assert getattr(off.choices[0].message, "reasoning_content", None) is None, off
        # The server's budget of 6: the thinking is closed after 6 tokens, then the answer.
        thought = on.choices[0].message.reasoning_content
        assert thought and on.choices[0].message.content, on
        _, text, _ = s.post_raw("/tokenize", json.dumps({"content": thought}).encode())
        assert len(json.loads(text)["tokens"]) <= 6, thought
        # Without a budget, 10 tokens never close the thinking: it is all answer text,
        # streamed or not, exactly the text reasoning_format none gives.
        unlimited = dict(model="any", messages=CHAT, max_tokens=10, temperature=0)
        body = {"reasoning_budget_tokens": -1}
        u = c.chat.completions.create(**unlimited, extra_body=body)
        inline = c.chat.completions.create(**unlimited, extra_body={**body,
                                                                    "reasoning_format": "none"})
        assert u.choices[0].message.content == inline.choices[0].message.content, (u, inline)
        assert getattr(u.choices[0].message, "reasoning_content", None) is None, u
        _, content, _, _ = streamed_reply(c.chat.completions.create(**unlimited, stream=True,
                                                                    extra_body=body))
        assert content.endswith(u.choices[0].message.content), (content, u)
        for bad, param in [({"reasoning_format": "sometimes"}, "reasoning_format"),
                           ({"chat_template_kwargs": [1]}, "chat_template_kwargs"),
                           ({"reasoning_budget_tokens": -3}, "reasoning_budget_tokens")]:
            try:
                c.chat.completions.create(**kw, extra_body=bad)
                raise AssertionError(f"expected 400 for {bad}")
            except openai.BadRequestError as e:
                assert e.body["param"] == param, e.body

        o = ollama.Client(host=s.url, headers={"Authorization": f"Bearer {KEY}"})
        name = o.list().models[0].model
        opts = {"temperature": 0, "num_predict": 40}
        t = o.chat(model=name, messages=CHAT, think=True, options=opts)
        assert t.message.thinking == thought and t.message.content, t
        parts = list(o.chat(model=name, messages=CHAT, think=True, stream=True, options=opts))
        assert "".join(p.message.thinking or "" for p in parts) == t.message.thinking, parts
        assert "".join(p.message.content for p in parts) == t.message.content, parts
        f = o.chat(model=name, messages=CHAT, think=False, options=opts)
        assert not f.message.thinking and f.prompt_eval_count > t.prompt_eval_count, f
        g = o.generate(model=name, prompt="Name three primary colors.", think=True,
                       options=opts)
        assert g.thinking and g.response, g
        # The chat page shows the thinking collapsed above the answer.
        page, _ = run_page_test(s, "chat-page-thinking.png", "thinking")
        assert page.returncode == 0 and "page: ok" in page.stdout, page.stdout + page.stderr
    finally:
        s.stop()


@check("reasoning: Harmony replies become reasoning, tool_calls and content, streamed and not")
def reasoning_harmony(binary, model):
    s = Server(binary, model, "--parallel", "1",
               "--chat-template-file", os.path.join(TEMPLATES, "harmony.jinja"), key=KEY)
    try:
        c = s.client()
        call = ('"<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather '
                '<|constrain|>json<|message|>{\\"city\\": \\"Oslo\\"}<|call|>"')
        grammar = ('root ::= "<|channel|>analysis<|message|>Weather" [a-z ]{3,20} ' + call +
                   ' "<|start|>assistant<|channel|>final<|message|>Checking" [a-z ]{3,20}')
        kw = dict(model="any", messages=ASK_WEATHER, tools=[WEATHER_TOOL], max_tokens=200,
                  temperature=0, extra_body={"grammar": grammar})
        r = c.chat.completions.create(**kw)
        m = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls", r
        assert m.reasoning_content.startswith("Weather") and m.content.startswith("Checking"), m
        assert [(t.function.name, json.loads(t.function.arguments)) for t in m.tool_calls] == \
            [("get_weather", {"city": "Oslo"})], m
        reasoning, content, calls, finish = streamed_reply(c.chat.completions.create(
            **kw, stream=True))
        assert (reasoning, content.strip(), finish) == (m.reasoning_content, m.content, "tool_calls"), (reasoning, content, m)
        assert [(x["name"], x["arguments"]) for x in calls] == \
            [(t.function.name, t.function.arguments) for t in m.tool_calls], calls
        # Without the markup's structure (free text), nothing is lost: it is all content.
        free = c.chat.completions.create(model="any", messages=CHAT, max_tokens=12,
                                         temperature=0)
        inline = c.chat.completions.create(model="any", messages=CHAT, max_tokens=12,
                                           temperature=0, extra_body={"reasoning_format": "none"})
        assert free.choices[0].message.content == inline.choices[0].message.content, free
    finally:
        s.stop()


@check("hostile chat templates: an error response within a second, the server serves on")
def hostile_templates(binary, model):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for what, source in HOSTILE_TEMPLATES.items():
            path = os.path.join(d, "template.jinja")
            with open(path, "w") as f:
                f.write(source)
            s = Server(binary, model, "--parallel", "1", "--chat-template-file", path, key=KEY)
            try:
                t = time.time()
                code, text, _ = s.post_raw("/v1/chat/completions", json.dumps(
                    {"model": "m", "messages": CHAT, "max_tokens": 4}).encode())
                took = time.time() - t
                assert code in (400, 500) and "error" in json.loads(text), (what, code, text)
                assert took < 1.0, f"{what}: {took:.2f} s"
                out = s.client().completions.create(model="m", prompt="Hi", max_tokens=4)
                assert out.choices[0].finish_reason in ("stop", "length"), what
            finally:
                assert s.stop() == 0, what


EDIT_PROMPT = ("Rewrite this function to use a loop instead of recursion, keep the names:\n"
               "def fibonacci(n):\n    if n <= 1:\n        return n\n"
               "    return fibonacci(n - 1) + fibonacci(n - 2)\n\nAnswer:\n")
SPEC_PROMPTS = [EDIT_PROMPT, "fn is_prime(n: u64) -> bool {", "The capital of France is"]


def greedy_texts(s, prompts, max_tokens):
    """Greedy completions of `prompts`, sent at once (the slots run side by side)."""
    def one(p):
        r = s.client().completions.create(model="m", prompt=p, max_tokens=max_tokens,
                                          temperature=0)
        return r.choices[0].text
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(one, prompts))


@check("speculation: --lookup and --draft keep greedy output; a bad draft is refused")
def speculation(binary, target, draft, other_vocab):
    """The 1.5B served plainly, with a 0.5B draft, with prompt lookup, and with both: the same
    greedy text for three requests at once, the drafts counted in /metrics."""
    texts = {}
    kinds = [("plain", []), ("draft", ["--draft", draft]), ("lookup", ["--lookup"]),
             ("both", ["--draft", draft, "--lookup"])]
    for name, extra in kinds:
        s = Server(binary, target, "--parallel", "3", "-c", "512", *extra, key=KEY)
        try:
            texts[name] = greedy_texts(s, SPEC_PROMPTS, 40)
            drafted, accepted = s.metric("drafted_tokens_total"), s.metric("accepted_tokens_total")
            if name == "plain":
                assert drafted == 0, drafted
            else:
                assert 0 < accepted <= drafted, (name, accepted, drafted)
        finally:
            assert s.stop() == 0
    for name in ["draft", "lookup", "both"]:
        assert texts[name] == texts["plain"], (name, texts[name], texts["plain"])
    for bad, why in [(other_vocab, "vocabulary"), (target, "must be smaller")]:
        try:
            Server(binary, draft, "--parallel", "1", "--draft", bad, key=KEY).stop()
            raise AssertionError(f"--draft {bad} was accepted")
        except RuntimeError as e:
            assert why in str(e), str(e)


def synthetic_model(name):
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                          "make-synthetic-models.py")
    return subprocess.run([sys.executable, script, "--path", name], check=True,
                          capture_output=True, text=True).stdout.strip()


@check("speculation: --spec mtp drafts for 4 slots and keeps greedy output; no block, refused")
def mtp_speculation(binary):
    """Qwen3.5 files with a multi-token-prediction block served with 4 slots plainly, with
    --spec mtp and with --lookup too: the same greedy text for four requests at once. The
    agreeing file's block drafts right 9 times in 10, so most drafts are accepted; the random
    file's mostly are not (its slots rewind almost every step). A file without a block is
    refused at start."""
    prompts = ["Once upon a time", "The capital of France is", "fn main() {",
               "One, two, three, four, five"]
    for name in ["qwen35-mtp-tiny", "qwen35-mtp-agree-tiny"]:
        path, texts = synthetic_model(name), {}
        for kind, extra in [("plain", []), ("mtp", ["--spec", "mtp"]),
                            ("mtp+lookup", ["--spec", "mtp", "--lookup"])]:
            s = Server(binary, path, "--parallel", "4", "-c", "256", *extra, key=KEY)
            try:
                texts[kind] = greedy_texts(s, prompts, 32)
                drafted = s.metric("drafted_tokens_total")
                accepted = s.metric("accepted_tokens_total")
                assert (drafted > 0) == (kind != "plain"), (name, kind, drafted)
                if name.endswith("agree-tiny") and kind != "plain":
                    assert accepted > drafted / 2, (name, kind, accepted, drafted)
            finally:
                assert s.stop() == 0
            assert texts[kind] == texts["plain"], (name, kind, texts[kind], texts["plain"])
    try:
        Server(binary, synthetic_model("qwen35-tiny"), "--parallel", "1", "--spec", "mtp",
               key=KEY).stop()
        raise AssertionError("--spec mtp was accepted for a model without a block")
    except RuntimeError as e:
        assert "multi-token" in str(e), str(e)


@check("speculation: Gemma 4's assistant drafts for 4 slots and keeps greedy output; a wrong "
       "target, refused")
def assistant_speculation(binary):
    """The synthetic Gemma 4 models served with 4 slots plainly, with --draft-assistant, with
    llama.cpp's spelling (-md FILE --spec-type draft-mtp) and with --lookup too: the same
    greedy text for four requests at once, drafts made; the agreeing pair's mostly accepted
    (its assistant drafts right 9 times in 10). The assistant beside a model of another
    architecture is refused at start."""
    prompts = ["Once upon a time", "The capital of France is", "fn main() {",
               "One, two, three, four, five"]
    for target, assistant in [("gemma4-tiny", "gemma4-assistant-tiny"),
                              ("gemma4-agree-tiny", "gemma4-assistant-agree-tiny")]:
        path, assistant, texts = synthetic_model(target), synthetic_model(assistant), {}
        for kind, extra in [("plain", []), ("assistant", ["--draft-assistant", assistant]),
                            ("-md", ["-md", assistant, "--spec-type", "draft-mtp"]),
                            ("assistant+lookup", ["--draft-assistant", assistant, "--lookup"])]:
            s = Server(binary, path, "--parallel", "4", "-c", "256", *extra, key=KEY)
            try:
                texts[kind] = greedy_texts(s, prompts, 32)
                drafted = s.metric("drafted_tokens_total")
                accepted = s.metric("accepted_tokens_total")
                assert (drafted > 0) == (kind != "plain"), (target, kind, drafted)
                if target.endswith("agree-tiny") and kind != "plain":
                    assert accepted > drafted / 2, (target, kind, accepted, drafted)
            finally:
                assert s.stop() == 0
            assert texts[kind] == texts["plain"], (target, kind, texts[kind], texts["plain"])
    try:
        Server(binary, synthetic_model("qwen3-tiny"), "--parallel", "1", "--draft-assistant",
               assistant, key=KEY).stop()
        raise AssertionError("an assistant was accepted for a model of another architecture")
    except RuntimeError as e:
        assert "Gemma 4" in str(e), str(e)


@check("split model: served from any part, the single file's text and log-probabilities")
def split_model(binary, model):
    """The model cut in three parts by `kolibri quantize COPY --split-max-size`, served from its
    second part: greedy completions with log-probabilities equal the single file's exactly."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        size = os.path.getsize(model) // 3 + 1
        subprocess.run([binary, "quantize", model, f"{d}/m.gguf", "COPY",
                        "--split-max-size", str(size)], check=True, capture_output=True)
        parts = sorted(os.listdir(d))
        assert parts == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)], parts
        answers = []
        for path in [model, f"{d}/{parts[1]}"]:
            s = Server(binary, path, "--parallel", "1", key=KEY)
            try:
                r = s.client().completions.create(model="m", prompt="def quicksort(items):",
                                                  max_tokens=12, temperature=0, logprobs=5)
                lp = r.choices[0].logprobs
                answers.append((r.choices[0].text, lp.token_logprobs, lp.top_logprobs))
            finally:
                assert s.stop() == 0
        assert answers[0] == answers[1], answers


def main():
    binary, chat_model, plain_model, large_model = sys.argv[1:5]
    if os.environ.get("KOLIBRI_LONG_CHAT"):
        # The scale (4k context, 6k tokens): minutes, so not part of the suite.
        chat_past_context(binary, chat_model, 4096, 6144)
        sys.exit(0 if all(ok for _, ok in RESULTS) else 1)
    s = Server(binary, chat_model, "--parallel", "4", key=KEY)
    try:
        for test in [models, chat, chat_stream, completions, errors, structured,
                     structured_errors, tools, responses, ollama_api, logprobs, embeddings, langchain, choices,
                     chat_page,
                     cancellation,
                     metrics, slots_off,
                     load]:
            test(s)
    finally:
        code = s.stop()
        RESULTS.append(("clean shutdown on SIGTERM", code == 0))
        print(f"{'ok  ' if code == 0 else 'FAIL'} clean shutdown on SIGTERM (exit {code})")
    slots(binary, chat_model)
    chat_past_context(binary, chat_model, 256, 400)
    slow_clients(binary, chat_model)
    connection_cap(binary, chat_model)
    graceful_stop(binary, chat_model)
    hostile_templates(binary, chat_model)
    reasoning_tags(binary, chat_model)
    reasoning_harmony(binary, chat_model)
    continuations(binary)
    speculation(binary, large_model, chat_model, plain_model)
    mtp_speculation(binary)
    assistant_speculation(binary)
    split_model(binary, large_model)
    single = Server(binary, chat_model, "--parallel", "1", key=KEY)
    try:
        queued_throughput(single)
    finally:
        single.stop()
    small = Server(binary, plain_model, "--parallel", "1", "--queue", "1", "--api-key", KEY)
    try:
        no_template(small)
        queue_full(small)
    finally:
        small.stop()
    failed = sum(1 for _, ok in RESULTS if not ok)
    print(f"server: {len(RESULTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
