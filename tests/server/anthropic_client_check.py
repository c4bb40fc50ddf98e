"""The `anthropic` client from PyPI against `kolibri serve`'s Messages API: a plain message, a
streamed one, a tool_use round trip, count_tokens, and an error in Anthropic's shape.

Usage: anthropic_client_check.py URL KEY   (prints "ok" when every check passed)
"""

import sys

import anthropic

url, key = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
MODEL = "kolibri"
# The 2026 client has no sampling parameters; the server takes temperature as an extra field.
GREEDY = {"temperature": 0}

# A plain message: a system prompt, text blocks, a stop reason and usage.
m = client.messages.create(model=MODEL, max_tokens=32, extra_body=GREEDY,
                           system="You answer in one word.",
                           messages=[{"role": "user", "content": "What is the capital of France?"}])
assert m.type == "message" and m.role == "assistant", m
assert m.content[0].type == "text" and "Paris" in m.content[0].text, m
assert m.stop_reason in ("end_turn", "max_tokens"), m
assert m.usage.input_tokens > 10 and m.usage.output_tokens > 0, m.usage

# Streamed: the text as deltas, and the final message the helper assembles equals it.
with client.messages.stream(model=MODEL, max_tokens=32, extra_body=GREEDY,
                            system="You answer in one word.",
                            messages=[{"role": "user", "content": "What is the capital of France?"}]) as s:
    pieces = [t for t in s.text_stream]
    final = s.get_final_message()
assert "".join(pieces) == final.content[0].text == m.content[0].text, (pieces, final)
assert final.usage.output_tokens == m.usage.output_tokens, final.usage

# Tools: the model calls the tool, the result goes back, the answer uses it.
tools = [{"name": "get_weather", "description": "The current weather in a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}]
ask = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
call = client.messages.create(model=MODEL, max_tokens=64, extra_body=GREEDY, tools=tools,
                              tool_choice={"type": "any"}, messages=ask)
uses = [b for b in call.content if b.type == "tool_use"]
assert call.stop_reason == "tool_use" and uses and uses[0].name == "get_weather", call
assert isinstance(uses[0].input, dict) and "city" in uses[0].input, uses[0]
# (tool_choice none: the 0.5B model, offered tools, keeps calling them.)
follow = ask + [{"role": "assistant", "content": call.content},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                              "content": '{"city": "Paris", "temperature_c": 31, "sky": "sunny"}'}]}]
done = client.messages.create(model=MODEL, max_tokens=60, extra_body=GREEDY, tools=tools,
                              tool_choice={"type": "none"}, messages=follow,
                              system="You are a helpful assistant. When a tool result arrives, "
                                     "answer the user in one sentence using it.")
text = "".join(b.text for b in done.content if b.type == "text")
assert "31" in text or "sunny" in text.lower(), done

# Streamed tool call: the input arrives as JSON deltas the helper parses.
with client.messages.stream(model=MODEL, max_tokens=64, extra_body=GREEDY, tools=tools,
                            tool_choice={"type": "any"}, messages=ask) as s:
    streamed = s.get_final_message()
streamed_uses = [b for b in streamed.content if b.type == "tool_use"]
assert streamed_uses and streamed_uses[0].input == uses[0].input, streamed

# count_tokens: the prompt as the plain request counts it.
n = client.messages.count_tokens(model=MODEL, system="You answer in one word.",
                                 messages=[{"role": "user", "content": "What is the capital of France?"}])
assert n.input_tokens == m.usage.input_tokens, (n, m.usage)

# Errors in Anthropic's shape: a wrong key, a bad request.
try:
    anthropic.Anthropic(base_url=url, api_key="wrong", max_retries=0).messages.create(
        model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    raise AssertionError("a wrong key was accepted")
except anthropic.AuthenticationError as e:
    assert e.body["error"]["type"] == "authentication_error", e.body
try:
    client.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "robot", "content": "Hi"}])
    raise AssertionError("a bad role was accepted")
except anthropic.BadRequestError as e:
    assert e.body["error"]["type"] == "invalid_request_error", e.body
print("ok")
