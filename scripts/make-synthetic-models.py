#!/usr/bin/env python3
"""Build deterministic synthetic GGUF models of the architectures no real file here has.

Each model has the real metadata layout of its architecture (the keys and tensor names
llama.cpp's converter writes), a real tokenizer copied from a reference model, and random
weights drawn at the scales that keep every block's contribution to the residual stream near
unit size, so the logits are well separated (llama.cpp with flash attention on and off agree on
them, which makes its outputs an oracle and not noise). The weights come from a counter-based
generator (splitmix64 of the element index), so a file is the same bytes on every machine and
numpy version; the tests compare them against llama.cpp outputs recorded once
(scripts/record-arch-reference.py).

    scripts/make-synthetic-models.py                   # the test models into the cache
    scripts/make-synthetic-models.py --only qwen3-tiny # some of them
    scripts/make-synthetic-models.py --path qwen3-tiny # print the path (building if missing)
    scripts/make-synthetic-models.py --list

Uses gguf-py 0.19.0 and numpy, installed with pip into the cache when the environment lacks
them; the tokenizers come from the reference models (scripts/fetch-models.py). Output: $KOLIBRI_MODEL_DIR/synthetic (default
~/.cache/kolibri/models/synthetic).
"""
import argparse
import hashlib
import importlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
GGUF_PY = "gguf==0.19.0"


def import_gguf():
    """gguf-py (and numpy): from the environment, else installed with pip into a folder of the
    cache (no system packages touched, nothing needed on the machine beforehand)."""
    lib = Path(os.environ.get("KOLIBRI_MODEL_DIR", Path.home() / ".cache/kolibri")) / "pylib"
    sys.path.append(str(lib))
    try:
        import gguf  # noqa: F401
    except ImportError:
        print(f"installing {GGUF_PY} into {lib}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(lib),
                        GGUF_PY], check=True)
        importlib.invalidate_caches()  # the folder did not exist when the import failed
    import gguf
    return gguf


gguf = import_gguf()
import numpy as np  # noqa: E402  (gguf-py brings it when the environment has none)
# Bumped whenever the generator or a model's recipe changes: the name of every file carries it,
# so a stale file is never taken for the current one.
GENERATOR_VERSION = 1


@dataclass
class Spec:
    """One synthetic model: its architecture and shape."""

    arch: str
    # A reference model known to fetch-models.py, or "vocab:NAME" for llama.cpp's
    # ggml-vocab-NAME.gguf (fetch-models.py vocab).
    tokenizer_from: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    seed: int
    rope_base: float = 1_000_000.0
    n_ctx_train: int = 4096
    # Mixture of experts (0 experts: a dense model).
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    # A tied head makes each token its own top prediction (h · E[t] holds |E[t]|²), a
    # degenerate model that only repeats itself: the head is a matrix of its own.
    tied_output: bool = False
    # The type every matrix is written in: F16 keeps llama.cpp's own rounding (activations in
    # f16, not quantized to 8 bits) far below the differences the tests look for.
    matrix_type: str = "F16"
    # Built by default (the tests need it); the others only when named.
    default: bool = True
    # shared_ff: the width of a shared expert (Qwen2-MoE); llama3_rope: (factor, low and high
    # frequency factors, original context) of Llama 3.1's RoPE scaling.
    extra: dict = field(default_factory=dict)


MODELS = {
    # Qwen3 dense: QK-norm, no QKV bias, head size independent of n_embd, GQA 4:1.
    "qwen3-tiny": Spec("qwen3", "qwen2.5-coder-0.5b", n_embd=128, n_layer=3, n_head=4,
                       n_head_kv=1, head_dim=64, n_ff=384, seed=1),
    # Qwen3 MoE: softmax router over 16 experts, top 4, weights renormalized.
    "qwen3moe-tiny": Spec("qwen3moe", "qwen2.5-coder-0.5b", n_embd=128, n_layer=3, n_head=4,
                          n_head_kv=1, head_dim=64, n_ff=384, seed=2, n_expert=16,
                          n_expert_used=4, n_ff_exp=64),
    # Llama 3.x: interleaved RoPE with llama3 frequency scaling (rope_freqs.weight), GQA 8:1,
    # the Llama 3 BPE vocabulary.
    "llama3-tiny": Spec("llama", "vocab:llama-bpe", n_embd=256, n_layer=3, n_head=8,
                        n_head_kv=1, head_dim=32, n_ff=512, seed=6, rope_base=500_000.0,
                        extra={"llama3_rope": (8.0, 1.0, 4.0, 8192)}),
    # Qwen2-MoE: Q/K/V biases, weights not renormalised, a shared expert behind a sigmoid gate.
    "qwen2moe-tiny": Spec("qwen2moe", "qwen2.5-coder-0.5b", n_embd=128, n_layer=3, n_head=4,
                          n_head_kv=2, head_dim=32, n_ff=384, seed=4, n_expert=8,
                          n_expert_used=2, n_ff_exp=64, extra={"shared_ff": 96}),
    # OLMoE: RMS norms over the whole query and key projections, weights not renormalised.
    # Its experts take the dense width (llama.cpp reads no expert_feed_forward_length for it).
    "olmoe-tiny": Spec("olmoe", "qwen2.5-coder-0.5b", n_embd=128, n_layer=3, n_head=4,
                       n_head_kv=4, head_dim=32, n_ff=64, seed=5, n_expert=16,
                       n_expert_used=4, n_ff_exp=64),
    # For speed: shaped like a small real MoE, 2.0B parameters of which 0.43B active per token
    # (64 experts, top 8). Written in F16 (4 GB); `kolibri quantize` makes the Q4_K_M mix:
    #   kolibri quantize $(scripts/make-synthetic-models.py --path qwen3moe-bench) \
    #       qwen3moe-bench-q4_k_m.gguf Q4_K_M
    "qwen3moe-bench": Spec("qwen3moe", "qwen2.5-coder-0.5b", n_embd=1024, n_layer=16,
                           n_head=16, n_head_kv=4, head_dim=128, n_ff=4096, seed=3,
                           n_expert=64, n_expert_used=8, n_ff_exp=512, default=False),
}


def model_dir() -> Path:
    d = os.environ.get("KOLIBRI_MODEL_DIR")
    base = Path(d) if d else Path.home() / ".cache" / "kolibri" / "models"
    return base / "synthetic"


def file_name(name: str) -> str:
    return f"{name}-v{GENERATOR_VERSION}.gguf"


# --- deterministic weights -------------------------------------------------------------------

def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, element-wise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def uniform(seed: int, stream: str, shape, std: float) -> np.ndarray:
    """Uniform values of standard deviation `std`, a pure function of (seed, stream, index)."""
    key = int.from_bytes(hashlib.sha256(f"{seed}/{stream}".encode()).digest()[:8], "little")
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        idx = np.arange(n, dtype=np.uint64) + np.uint64(key)
    bits = splitmix64(idx) >> np.uint64(40)  # 24 bits
    u = bits.astype(np.float64) / float(1 << 24)  # [0, 1)
    return ((2.0 * u - 1.0) * (std * np.sqrt(3.0))).astype(np.float32).reshape(shape)


# --- writing ---------------------------------------------------------------------------------

def copy_tokenizer(w: "gguf.GGUFWriter", source: Path) -> int:
    """Copies every tokenizer.* key of `source`; returns its vocabulary size."""
    r = gguf.GGUFReader(source)
    n_vocab = 0
    for name, f in r.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            w.add_key_value(name, f.contents(), vtype, sub_type=sub)
            if name == "tokenizer.ggml.tokens":
                n_vocab = len(f.data)
        else:
            w.add_key_value(name, f.contents(), vtype)
    if n_vocab == 0:
        sys.exit(f"{source}: no tokenizer.ggml.tokens")
    return n_vocab


def add_matrix(w, name: str, values: np.ndarray, ty: str) -> None:
    values = values.astype(np.float32)
    if ty == "F32":
        w.add_tensor(name, values)
        return
    qtype = getattr(gguf.GGMLQuantizationType, ty)
    w.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)


def add_norm(w, s: Spec, name: str, n: int, scale: float = 1.0) -> None:
    # Near `scale` (RMSNorm weights), each one different so a misplaced norm shows.
    w.add_tensor(name, (scale * (1.0 + uniform(s.seed, name, (n,), 0.1))).astype(np.float32))


def add_linear(w, s: Spec, name: str, rows: int, k: int, out_std: float = 1.0) -> None:
    """A [rows, k] matrix whose outputs have about `out_std` for unit-rms inputs."""
    add_matrix(w, name, uniform(s.seed, name, (rows, k), out_std / np.sqrt(k)), s.matrix_type)


def write_metadata(w, s: Spec) -> None:
    a = s.arch
    w.add_string("general.name", f"kolibri synthetic {a}")
    w.add_uint32(f"{a}.context_length", s.n_ctx_train)
    w.add_uint32(f"{a}.embedding_length", s.n_embd)
    w.add_uint32(f"{a}.block_count", s.n_layer)
    w.add_uint32(f"{a}.feed_forward_length", s.n_ff)
    w.add_uint32(f"{a}.attention.head_count", s.n_head)
    w.add_uint32(f"{a}.attention.head_count_kv", s.n_head_kv)
    w.add_uint32(f"{a}.attention.key_length", s.head_dim)
    w.add_uint32(f"{a}.attention.value_length", s.head_dim)
    w.add_float32(f"{a}.rope.freq_base", s.rope_base)
    if a == "llama":
        w.add_uint32(f"{a}.rope.dimension_count", s.head_dim)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    if s.n_expert:
        w.add_uint32(f"{a}.expert_count", s.n_expert)
        w.add_uint32(f"{a}.expert_used_count", s.n_expert_used)
        if a != "olmoe":
            w.add_uint32(f"{a}.expert_feed_forward_length", s.n_ff_exp)
    if "shared_ff" in s.extra:
        w.add_uint32(f"{a}.expert_shared_feed_forward_length", s.extra["shared_ff"])


def write_layer(w, s: Spec, il: int) -> None:
    e, hd = s.n_embd, s.head_dim
    q_dim, kv_dim = s.n_head * hd, s.n_head_kv * hd
    n = lambda t: f"blk.{il}.{t}"  # noqa: E731
    add_norm(w, s, n("attn_norm.weight"), e)
    add_linear(w, s, n("attn_q.weight"), q_dim, e)
    add_linear(w, s, n("attn_k.weight"), kv_dim, e)
    add_linear(w, s, n("attn_v.weight"), kv_dim, e)
    add_linear(w, s, n("attn_output.weight"), e, q_dim)
    if s.arch == "qwen2moe":
        # Biases of about a tenth of the projections' outputs.
        for part, size in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
            name = n(f"attn_{part}.bias")
            w.add_tensor(name, uniform(s.seed, name, (size,), 0.1))
    if s.arch in ("qwen3", "qwen3moe"):
        add_norm(w, s, n("attn_q_norm.weight"), hd)
        add_norm(w, s, n("attn_k_norm.weight"), hd)
    if s.arch == "olmoe":
        add_norm(w, s, n("attn_q_norm.weight"), q_dim)
        add_norm(w, s, n("attn_k_norm.weight"), kv_dim)
    add_norm(w, s, n("ffn_norm.weight"), e)
    if s.n_expert == 0:
        add_linear(w, s, n("ffn_gate.weight"), s.n_ff, e)
        add_linear(w, s, n("ffn_up.weight"), s.n_ff, e)
        # silu(gate) * up has about 0.5 rms for unit inputs.
        add_linear(w, s, n("ffn_down.weight"), e, s.n_ff, out_std=2.0)
        return
    # The router: logits of a few units, so the top-k choice is clear (ties would make the
    # reference arbitrary) but not one-hot.
    w.add_tensor(n("ffn_gate_inp.weight"),
                 uniform(s.seed, n("ffn_gate_inp.weight"), (s.n_expert, e), 2.0 / np.sqrt(e)))
    f = s.n_ff_exp
    for part, rows, k, std in (("gate", f, e, 1.0), ("up", f, e, 1.0), ("down", e, f, 2.0)):
        name = n(f"ffn_{part}_exps.weight")
        add_matrix(w, name, uniform(s.seed, name, (s.n_expert, rows, k), std / np.sqrt(k)),
                   s.matrix_type)
    if "shared_ff" in s.extra:
        f = s.extra["shared_ff"]
        name = n("ffn_gate_inp_shexp.weight")
        # A gate logit of about one unit: the shared expert's share varies token by token.
        w.add_tensor(name, uniform(s.seed, name, (e,), 1.0 / np.sqrt(e)))
        add_linear(w, s, n("ffn_gate_shexp.weight"), f, e)
        add_linear(w, s, n("ffn_up_shexp.weight"), f, e)
        add_linear(w, s, n("ffn_down_shexp.weight"), e, f, out_std=2.0)


def llama3_rope_freqs(s: Spec) -> np.ndarray:
    """Llama 3.1's per-dimension RoPE divisors, computed as its GGUF converter does."""
    factor, low, high, old_ctx = s.extra["llama3_rope"]
    freqs = 1.0 / (s.rope_base ** (np.arange(0, s.head_dim, 2) / s.head_dim))
    out = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < old_ctx / high:
            out.append(1.0)
        elif wavelen > old_ctx / low:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def tokenizer_source(s: Spec) -> Path:
    fetch = [sys.executable, str(SCRIPTS / "fetch-models.py"), "--path"]
    if s.tokenizer_from.startswith("vocab:"):
        folder = subprocess.run(fetch + ["vocab"], check=True, capture_output=True, text=True)
        name = s.tokenizer_from.split(":", 1)[1]
        return Path(folder.stdout.strip()) / f"ggml-vocab-{name}.gguf"
    source = subprocess.run(fetch + [s.tokenizer_from], check=True, capture_output=True,
                            text=True)
    return Path(source.stdout.strip())


def build(name: str, out: Path) -> None:
    s = MODELS[name]
    tmp = out.with_suffix(".partial")
    w = gguf.GGUFWriter(tmp, s.arch)
    write_metadata(w, s)
    n_vocab = copy_tokenizer(w, tokenizer_source(s))
    # Unit-variance embeddings. Logits of about 4 nat of spread: top-1/top-2 gaps mostly well
    # above rounding noise, and log-probabilities that are not all 0 or -inf. The tied head's
    # rows are unit-variance, so the final norm scales the hidden state to 4 / sqrt(n_embd).
    add_matrix(w, "token_embd.weight", uniform(s.seed, "token_embd", (n_vocab, s.n_embd), 1.0),
               s.matrix_type)
    head_scale = 4.0 / np.sqrt(s.n_embd) if s.tied_output else 1.0
    add_norm(w, s, "output_norm.weight", s.n_embd, head_scale)
    if not s.tied_output:
        add_linear(w, s, "output.weight", n_vocab, s.n_embd, out_std=4.0)
    if "llama3_rope" in s.extra:
        w.add_tensor("rope_freqs.weight", llama3_rope_freqs(s))
    for il in range(s.n_layer):
        write_layer(w, s, il)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(out)


def path_of(name: str) -> Path:
    out = model_dir() / file_name(name)
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"building {out.name}...", file=sys.stderr)
        build(name, out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--path", metavar="NAME", help="print the model's path, building it if missing")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for name, s in MODELS.items():
            print(f"{name}\t{s.arch}\t{'test' if s.default else 'on request'}")
        return
    if args.path:
        if args.path not in MODELS:
            sys.exit(f"unknown synthetic model {args.path!r}; --list shows them")
        print(path_of(args.path))
        return
    names = args.only.split(",") if args.only else [n for n, s in MODELS.items() if s.default]
    for name in names:
        if name not in MODELS:
            sys.exit(f"unknown synthetic model {name!r}; --list shows them")
        print(path_of(name))


if __name__ == "__main__":
    main()
