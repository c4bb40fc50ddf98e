"""llama-cpp-python 0.3.36, unmodified, on Kolibri's libllama (LLAMA_CPP_LIB_PATH).

Usage: check_llama_cpp_python.py KOLIBRI_BINARY MODEL

Each check compares with what Kolibri itself gives (the `kolibri` command line on the same
model), so a difference in the shim shows up as a difference here.
"""

import re
import subprocess
import sys
import time

import llama_cpp

RESULTS = []


def check(name):
    def wrap(fn):
        def run(*args):
            start = time.time()
            try:
                fn(*args)
                ok, why = True, ""
            except Exception as e:  # a failed check reports and the others still run
                ok, why = False, f": {type(e).__name__}: {e}"
            RESULTS.append((name, ok))
            print(f"{'ok  ' if ok else 'FAIL'} {name} ({time.time() - start:.1f} s){why}", flush=True)
        return run
    return wrap


def kolibri(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout


PROMPTS = [
    "def fibonacci(n):",
    "The capital of France is",
    "// A C function that reverses a string in place\n",
]


@check("create_completion: greedy text identical to `kolibri run --temp 0`")
def greedy(binary, model, llm):
    for prompt in PROMPTS:
        ours = llm.create_completion(prompt, max_tokens=48, temperature=0.0)
        text = ours["choices"][0]["text"]
        reference = kolibri(binary, "run", "--raw", "-m", model, "-p", prompt, "-n", "48",
                            "--temp", "0", "-t", "2")
        assert reference.startswith(prompt), reference[:80]
        # `kolibri run` ends its output with a newline of its own.
        assert reference.endswith("\n")
        expected = reference[len(prompt):-1]
        # `kolibri run` stops at the end of generation as llama-cpp-python does.
        assert text == expected, f"{prompt!r}: {text!r} != {expected!r}"
        assert ours["usage"]["completion_tokens"] > 0


@check("tokenize/detokenize: identical to `kolibri tokenize`")
def tokens(binary, model, llm):
    texts = ["Hello world", "  leading spaces and\ttabs\n", "naïve café – ünïcödé 你好",
             "<|im_start|>user\nhi<|im_end|>", "fn main() { println!(\"{}\", 1 + 2); }"]
    for text in texts:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        reference = kolibri(binary, "tokenize", "-m", model, "--ids", "--no-bos", "-p", text)
        expected = [int(x) for x in re.findall(r"-?\d+", reference)]
        assert ids == expected, f"{text!r}: {ids} != {expected}"
        assert llm.detokenize(ids, special=True).decode() == text
        plain = llm.tokenize(text.encode(), add_bos=False, special=False)
        reference = kolibri(binary, "tokenize", "-m", model, "--ids", "--no-bos",
                            "--no-parse-special", "-p", text)
        assert plain == [int(x) for x in re.findall(r"-?\d+", reference)], text


@check("create_chat_completion: the GGUF's template, streamed and not, the same reply")
def chat(binary, model, llm):
    messages = [{"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "Name three primary colors."}]
    whole = llm.create_chat_completion(messages=messages, max_tokens=40, temperature=0.0)
    reply = whole["choices"][0]["message"]["content"]
    assert whole["choices"][0]["message"]["role"] == "assistant"
    assert reply.strip(), whole
    assert whole["choices"][0]["finish_reason"] in ("stop", "length")
    streamed = ""
    chunks = 0
    for chunk in llm.create_chat_completion(messages=messages, max_tokens=40, temperature=0.0,
                                            stream=True):
        streamed += chunk["choices"][0]["delta"].get("content") or ""
        chunks += 1
    assert chunks > 2 and streamed == reply, (streamed, reply)
    # The template is the GGUF's, rendered by llama-cpp-python from the shim's metadata.
    template = llm.metadata.get("tokenizer.chat_template", "")
    assert "<|im_start|>" in template, template[:80]
    # A second turn continues the conversation.
    messages += [{"role": "assistant", "content": reply},
                 {"role": "user", "content": "And one secondary color?"}]
    again = llm.create_chat_completion(messages=messages, max_tokens=20, temperature=0.0)
    assert again["choices"][0]["message"]["content"].strip()


@check("grammar: LlamaGrammar.from_string only produces what the grammar allows")
def grammar(binary, model, llm):
    yes_no = llama_cpp.LlamaGrammar.from_string('root ::= "yes" | "no"', verbose=False)
    for seed in range(4):
        out = llm.create_completion("Is the sky blue? Answer:", max_tokens=8, temperature=0.9,
                                    seed=seed, grammar=yes_no)
        assert out["choices"][0]["text"] in ("yes", "no"), out["choices"][0]["text"]
    obj = llama_cpp.LlamaGrammar.from_string(r'''
root   ::= "{" ws "\"name\":" ws string "," ws "\"age\":" ws number ws "}"
string ::= "\"" [a-zA-Z ]{1,20} "\""
number ::= [1-9] [0-9]{0,2}
ws     ::= [ ]?
''', verbose=False)
    pattern = re.compile(r'\{ ?"name": ?"[a-zA-Z ]{1,20}", ?"age": ?[1-9][0-9]{0,2} ?\}')
    for seed in range(3):
        out = llm.create_completion("A person as JSON:", max_tokens=40, temperature=0.8, seed=seed,
                                    grammar=obj)
        text = out["choices"][0]["text"]
        assert pattern.fullmatch(text), text


@check("state: save_state / load_state continue identically")
def state(binary, model, llm):
    llm.reset()
    llm.create_completion("Once upon a time", max_tokens=4, temperature=0.0)
    llm.set_seed(1234)
    saved = llm.save_state()
    first = llm.create_completion("Once upon a time, in a", max_tokens=16, temperature=1.0)
    other = llm.create_completion("Once upon a time, in a", max_tokens=16, temperature=1.0)
    llm.load_state(saved)
    llm.set_seed(1234)
    again = llm.create_completion("Once upon a time, in a", max_tokens=16, temperature=1.0)
    assert first["choices"][0]["text"] == again["choices"][0]["text"], (first, again)
    assert saved.llama_state_size > 0
    # The state really carries the cache: the restored tokens are reused, not re-evaluated.
    assert llm.n_tokens >= len(llm.tokenize(b"Once upon a time"))
    del other


@check("embeddings: one vector per input, unit length")
def embeddings(binary, model, _llm):
    emb = llama_cpp.Llama(model_path=model, embedding=True, n_ctx=256, n_threads=2,
                          verbose=False)
    vectors = emb.embed(["hello world", "a longer sentence about something else"])
    assert len(vectors) == 2 and len(vectors[0]) == emb.n_embd()
    norm = sum(x * x for x in vectors[0]) ** 0.5
    assert abs(norm - 1.0) < 1e-3, norm
    emb.close()


def main():
    binary, model = sys.argv[1:3]
    llm = llama_cpp.Llama(model_path=model, n_ctx=1024, n_threads=2, n_threads_batch=2,
                          verbose=False)
    for test in [greedy, tokens, chat, grammar, state]:
        test(binary, model, llm)
    llm.close()
    embeddings(binary, model, None)
    failed = sum(1 for _, ok in RESULTS if not ok)
    print(f"llama-cpp-python checks: {len(RESULTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
