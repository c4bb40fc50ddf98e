#!/usr/bin/env python3
"""Reference renderings of chat templates, made the way Hugging Face transformers renders them.

Usage: template-reference.py TEMPLATE_DIR > cases.json

For every `*.jinja` in TEMPLATE_DIR and every conversation below (a system prompt, several
turns, tool definitions, a tool call and its result), renders with jinja2 set up as
transformers' `apply_chat_template` sets it up: a sandboxed environment with trim_blocks and
lstrip_blocks, the loop-controls extension, a no-op `{% generation %}` block, `tojson` as
`json.dumps` (ensure_ascii off, indent/separators/sort_keys passed on), `raise_exception`,
`strftime_now`, and `tools`/`documents` passed as None when absent. Prints one JSON list of
{template, case, source, messages, tools, add_generation_prompt, bos_token, eos_token,
output | error}; tests/template_corpus.rs renders the same with Kolibri and compares bytes.
jinja2 comes from the environment, else is installed with pip into the model cache.
"""

import json
import os
import sys
from datetime import datetime
from pathlib import Path

JINJA2 = "jinja2==3.1.6"


def import_jinja2():
    lib = Path(os.environ.get("KOLIBRI_MODEL_DIR", Path.home() / ".cache/kolibri")) / "pylib"
    sys.path.append(str(lib))
    try:
        import jinja2  # noqa: F401
    except ImportError:
        import importlib
        import subprocess
        print(f"installing {JINJA2} into {lib}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(lib),
                        JINJA2], check=True)
        importlib.invalidate_caches()
    import jinja2
    return jinja2


def environment(jinja2):
    from jinja2.ext import Extension, loopcontrols
    from jinja2.nodes import CallBlock
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """`{% generation %}...{% endgeneration %}`: marks assistant text; renders its body."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Current weather in a city, with <units> & 'quotes'.",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "description": "City name"},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}
CALL = {"id": "call_0001", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}

CASES = {
    "turns": dict(messages=[
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Hello! What is 2+2?"},
        {"role": "assistant", "content": "2+2 is 4."},
        {"role": "user", "content": "And times 3? Answer with \"quotes\" & <tags>."},
    ], tools=None, add_generation_prompt=True),
    "no_system": dict(messages=[
        {"role": "user", "content": "Write a haiku about the sea."},
        {"role": "assistant", "content": "Waves fold into foam,\nsalt wind carries gull voices,\n"
                                         "the tide keeps its time."},
        {"role": "user", "content": "Now one about mountains — in Ünïcödé."},
    ], tools=None, add_generation_prompt=True),
    "closed": dict(messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ], tools=None, add_generation_prompt=False),
    "tools": dict(messages=[
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Zürich?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_0001", "name": "get_weather",
         "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
    ], tools=[WEATHER], add_generation_prompt=True),
    "tool_offer": dict(messages=[
        {"role": "user", "content": "Is it raining in Oslo?"},
    ], tools=[WEATHER], add_generation_prompt=True),
}
BOS, EOS = "<s>", "</s>"


def main():
    jinja2 = import_jinja2()
    env = environment(jinja2)
    out = []
    for path in sorted(Path(sys.argv[1]).glob("*.jinja")):
        source = path.read_text()
        for name, case in CASES.items():
            row = {"template": path.name, "case": name, "source": source, "bos_token": BOS,
                   "eos_token": EOS, **case}
            try:
                template = env.from_string(source)
                row["output"] = template.render(
                    messages=case["messages"], tools=case["tools"], documents=None,
                    add_generation_prompt=case["add_generation_prompt"], bos_token=BOS,
                    eos_token=EOS)
            except Exception as e:  # the reference refuses: the case is skipped and listed
                row["error"] = f"{type(e).__name__}: {e}"
            out.append(row)
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
