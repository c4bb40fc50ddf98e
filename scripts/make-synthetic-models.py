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
    scripts/make-synthetic-models.py --reference-path mistral-tiny  # the file llama.cpp runs
    scripts/make-synthetic-models.py --list

Uses gguf-py 0.19.0 and numpy, installed with pip into the cache when the environment lacks
them; the tokenizers come from the reference models (scripts/fetch-models.py). Output: $KOLIBRI_MODEL_DIR/synthetic (default
~/.cache/kolibri/models/synthetic).
"""
import argparse
import hashlib
import importlib
import os
import shutil
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
# Bumped whenever the generator changes: the name of every file carries it, so a stale file is
# never taken for the current one. A change to one model's recipe bumps its `revision` instead.
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
    # The type of the token embeddings (the head too, where tied); "": matrix_type.
    embd_type: str = ""
    # RMS norms' epsilon: unusual values show an engine that ignores the metadata's.
    rms_eps: float = 1e-6
    # Built by default (the tests need it); the others only when named.
    default: bool = True
    # Weights from numpy's generator (bench models: fast to write on the machine that runs
    # them, not the same bytes on every numpy version).
    fast_weights: bool = False
    # shared_ff: the width of a shared expert (Qwen2-MoE); llama3_rope: (factor, low and high
    # frequency factors, original context) of Llama 3.1's RoPE scaling; rope_dims: dimensions
    # rotated when not all; long_rope: original context of Phi-3's LongRoPE; sliding_window,
    # softcap: (attention, final); post_norm_scale: Gemma's post-norm weights; yarn: (factor,
    # original context) of YaRN RoPE scaling; expert_type: the experts' tensor type; sinks:
    # attention sink logits (gpt-oss); yarn_tuning: YaRN's (beta_fast, beta_slow, log
    # multiplier); temperature_scale: the attention temperature (Mistral 3); pre_tokenizer:
    # replaces the vocabulary's.
    extra: dict = field(default_factory=dict)
    # Bumped whenever this model's recipe changes (its file name carries it past 1).
    revision: int = 1
    # llama.cpp runs a twin of the model in this architecture instead (same weights, the
    # metadata and extra tensors that make it compute the same thing), where it does not
    # implement a feature of the model's own: the reference comes from the twin.
    reference_arch: str = ""


MODELS = {
    # Qwen3 dense: QK-norm, no QKV bias, head size independent of n_embd, GQA 4:1.
    "qwen3-tiny": Spec("qwen3", "qwen2.5-coder-0.5b", n_embd=128, n_layer=3, n_head=4,
                       n_head_kv=1, head_dim=64, n_ff=384, seed=1),
    # A Qwen3 reranker as llama.cpp's converter writes Qwen3-Reranker: rank pooling (the last
    # token's hidden state), a two-row classifier head (the "yes" and "no" rows) and the
    # `rerank` prompt template; its score is softmax(head · h)[0].
    "qwen3-reranker-tiny": Spec("qwen3", "qwen2.5-coder-0.5b", n_embd=128, n_layer=2,
                                n_head=4, n_head_kv=1, head_dim=64, n_ff=384, seed=13,
                                extra={"reranker": ["yes", "no"]}),
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
    # Phi-3 / Phi-4-mini: fused QKV and gate-up tensors, NeoX RoPE over 48 of 64 dimensions,
    # LongRoPE (long factors and attention factor: the 512-token test context is longer than
    # the original 32). llama.cpp ignores Phi's sliding window, so the metadata's is set short
    # enough to show if it were applied.
    "phi3-tiny": Spec("phi3", "vocab:phi-3", n_embd=256, n_layer=3, n_head=4, n_head_kv=2,
                      head_dim=64, n_ff=384, seed=7, rope_base=10_000.0,
                      extra={"rope_dims": 48, "long_rope": 32, "sliding_window": 8}),
    # Gemma 2: soft-capped attention scores and logits (caps low enough to bite on these
    # scores), even layers on an 8-token window, tied head, post-norms, head size 48 != n_embd
    # / n_head.
    "gemma2-tiny": Spec("gemma2", "vocab:llama-spm", n_embd=128, n_layer=4, n_head=4,
                        n_head_kv=2, head_dim=48, n_ff=384, seed=8, rope_base=10_000.0,
                        tied_output=True,
                        extra={"sliding_window": 8, "softcap": (4.0, 15.0),
                               "post_norm_scale": 3.0}),
    # Gemma 2 with every metadata constant away from its usual value (issue 44): a strong
    # attention cap (5, where real files say 50) and a mild final one (50), 96-wide heads over
    # n_embd 256 (query width 384), a 32-token window (shorter than the longest prompt), a tied
    # Q4_0 head, an epsilon of 1e-2 (real files: 1e-6) and a RoPE base of 1000 (10000). Queries
    # and keys of 3x unit rms give scores of about 9 before the cap, so the cap bends most of
    # them.
    "gemma2-capped-tiny": Spec("gemma2", "vocab:llama-spm", n_embd=256, n_layer=4, n_head=4,
                               n_head_kv=2, head_dim=96, n_ff=512, seed=11,
                               rope_base=1_000.0, tied_output=True, embd_type="Q4_0",
                               rms_eps=1e-2,
                               extra={"sliding_window": 32, "softcap": (5.0, 50.0),
                                      "post_norm_scale": 3.0, "qk_std": 3.0}),
    # Mistral-style Llama: every layer on an 8-token window. llama.cpp ignores the window of a
    # `llama` file, so its reference comes from a granite_swa twin (the same layers with the
    # window on every layer, attention sinks at -30: no weight, and unit logit scale).
    "mistral-tiny": Spec("llama", "vocab:llama-spm", n_embd=128, n_layer=3, n_head=4,
                         n_head_kv=1, head_dim=32, n_ff=256, seed=9, rope_base=10_000.0,
                         extra={"sliding_window": 8}, reference_arch="granite_swa"),
    # LFM2: short-convolution layers (kernel 3) with attention layers between them (layers 2
    # and 4; GQA 2:1, per-head QK-norm), as the per-layer head_count_kv says (0: convolution).
    # Its prompts of up to 85 tokens run through several convolution states.
    "lfm2-tiny": Spec("lfm2", "vocab:llama-bpe", n_embd=128, n_layer=5, n_head=4, n_head_kv=2,
                      head_dim=32, n_ff=384, seed=12, rope_base=10_000.0, rms_eps=1e-5,
                      extra={"conv_layers": (0, 1, 3), "conv_kernel": 3}),
    # LFM2-MoE: LFM2's layers with a mixture of 8 experts (top 2) after one dense layer:
    # sigmoid gate scores, a per-expert selection bias, weights renormalised.
    "lfm2moe-tiny": Spec("lfm2moe", "vocab:llama-bpe", n_embd=128, n_layer=5, n_head=4,
                         n_head_kv=2, head_dim=32, n_ff=384, seed=13, rope_base=10_000.0,
                         rms_eps=1e-5, n_expert=8, n_expert_used=2, n_ff_exp=96,
                         extra={"conv_layers": (0, 2, 3), "conv_kernel": 3, "dense_lead": 1}),
    # Qwen3.5: three Gated DeltaNet layers (4 value heads reading 2 key heads of 32, a
    # 4-tap convolution) and one gated attention layer (GQA 2:1, QK-norm, RoPE on 16 of 32
    # dimensions, the output times the sigmoid of a per-head gate from the query projection).
    "qwen35-tiny": Spec("qwen35", "vocab:qwen35", n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                        head_dim=32, n_ff=384, seed=14, rope_base=10_000_000.0,
                        extra={"delta": (4, 2, 4, 32), "full_attn_interval": 4,
                               "rope_dims": 16, "rope_sections": [3, 3, 2, 0]}),
    # Qwen3.5 with its multi-token-prediction block as the converter stores it: one more
    # block after the trunk (block_count 5, nextn_predict_layers 1), a full-attention layer
    # with eh_proj, enorm, hnorm and its own shared_head_norm. Engines that do not draft run
    # the trunk alone.
    "qwen35-mtp-tiny": Spec("qwen35", "vocab:qwen35", n_embd=128, n_layer=4, n_head=4,
                            n_head_kv=2, head_dim=32, n_ff=384, seed=16,
                            rope_base=10_000_000.0,
                            extra={"delta": (4, 2, 4, 32), "full_attn_interval": 4,
                                   "rope_dims": 16, "rope_sections": [3, 3, 2, 0], "mtp": 1}),
    # A target and its multi-token-prediction block that agree at a known rate ("agree"), for
    # drafting speed: every layer's output projection is zero, so the residual stream keeps the
    # token's embedding; the head maps token t to pi(t), a fixed permutation of the ordinary
    # tokens, so greedy text follows pi; the block reads only the next token's embedding
    # (eh_proj = [I, 0]) and its own head maps x to pi(tau(x)), where tau swaps 10% of the
    # tokens in pairs: each draft is right with probability 0.9. The Llama 2 vocabulary keeps
    # the head small. The tiny one is for tests; the bench one is shaped like a 1.5B Qwen3.5
    # (18 delta-net and 6 attention layers of 2048, FFN 6144): F16 (3 GB), quantized with
    # `kolibri quantize ... Q4_K_M` as below.
    "qwen35-mtp-agree-tiny": Spec("qwen35", "vocab:llama-spm", n_embd=128, n_layer=4,
                                  n_head=4, n_head_kv=2, head_dim=32, n_ff=384, seed=23,
                                  rope_base=10_000_000.0,
                                  extra={"delta": (4, 2, 4, 32), "full_attn_interval": 4,
                                         "rope_dims": 16, "rope_sections": [3, 3, 2, 0],
                                         "mtp": 1, "agree": 0.9}),
    # The same with the right token's logit at 5 ("agree_logit"), not 12: at temperature 0.8 the
    # target's likeliest token (what the block drafts) has about a third of the probability,
    # so sampled drafts are kept and rejected alike (the chi-square check).
    "qwen35-mtp-agree-warm-tiny": Spec("qwen35", "vocab:llama-spm", n_embd=128, n_layer=4,
                                       n_head=4, n_head_kv=2, head_dim=32, n_ff=384, seed=25,
                                       rope_base=10_000_000.0,
                                       extra={"delta": (4, 2, 4, 32), "full_attn_interval": 4,
                                              "rope_dims": 16, "rope_sections": [3, 3, 2, 0],
                                              "mtp": 1, "agree": 0.9, "agree_logit": 5.0}),
    "qwen35-mtp-agree-bench": Spec("qwen35", "vocab:llama-spm", n_embd=2048, n_layer=24,
                                   n_head=16, n_head_kv=4, head_dim=128, n_ff=6144, seed=24,
                                   rope_base=10_000_000.0, default=False, fast_weights=True,
                                   extra={"delta": (4, 16, 16, 128), "full_attn_interval": 4,
                                          "rope_dims": 64, "rope_sections": [11, 11, 10, 0],
                                          "mtp": 1, "agree": 0.9}),
    # Gemma 4 agreeing with its assistant (below) as the Qwen3.5 pair above agrees with its
    # block: layers that write nothing into the residual stream, a head mapping t to pi(t).
    # The bench one is shaped like a 1B Gemma 4 (20 layers of 2048, five sliding to one
    # global, FFN 6144).
    "gemma4-agree-tiny": Spec("gemma4", "vocab:llama-spm", n_embd=128, n_layer=4, n_head=4,
                              n_head_kv=2, head_dim=64, n_ff=256, seed=29,
                              extra={"sliding_window": 8, "swa_pattern": [True, False] * 2,
                                     "head_dim_swa": 32, "rope_base_swa": 10_000.0,
                                     "post_norm_scale": 1.0, "final_softcap": 30.0,
                                     "gemma4_rope_freqs": True, "agree": 0.9}),
    # The same with the right token's logit at 5 (see `qwen35-mtp-agree-warm-tiny`).
    "gemma4-agree-warm-tiny": Spec("gemma4", "vocab:llama-spm", n_embd=128, n_layer=4, n_head=4,
                                   n_head_kv=2, head_dim=64, n_ff=256, seed=33,
                                   extra={"sliding_window": 8, "swa_pattern": [True, False] * 2,
                                          "head_dim_swa": 32, "rope_base_swa": 10_000.0,
                                          "post_norm_scale": 1.0, "final_softcap": 30.0,
                                          "gemma4_rope_freqs": True, "agree": 0.9,
                                          "agree_logit": 5.0}),
    "gemma4-agree-bench": Spec("gemma4", "vocab:llama-spm", n_embd=2048, n_layer=20, n_head=8,
                               n_head_kv=2, head_dim=256, n_ff=6144, seed=30, default=False,
                               fast_weights=True,
                               extra={"sliding_window": 512,
                                      "swa_pattern": [il % 6 != 5 for il in range(20)],
                                      "head_dim_swa": 256, "rope_base_swa": 10_000.0,
                                      "post_norm_scale": 1.0, "final_softcap": 30.0,
                                      "gemma4_rope_freqs": True, "agree": 0.9}),
    # Qwen3.5-MoE: Qwen3.5's layers with 8 experts (top 2, softmax, renormalised) whose gate
    # and up matrices share one tensor, and a shared expert behind a sigmoid gate.
    "qwen35moe-tiny": Spec("qwen35moe", "vocab:qwen35", n_embd=128, n_layer=4, n_head=4,
                           n_head_kv=2, head_dim=32, n_ff=384, seed=15,
                           rope_base=10_000_000.0, n_expert=8, n_expert_used=2, n_ff_exp=64,
                           extra={"delta": (4, 2, 4, 32), "full_attn_interval": 4,
                                  "rope_dims": 16, "rope_sections": [3, 3, 2, 0],
                                  "shared_ff": 96, "gate_up_fused": True}),
    # Qwen3.5-MoE with its multi-token-prediction block: a full-attention layer whose FFN is
    # the trunk's mixture (8 experts, top 2, and the shared expert).
    "qwen35moe-mtp-tiny": Spec("qwen35moe", "vocab:qwen35", n_embd=128, n_layer=4, n_head=4,
                               n_head_kv=2, head_dim=32, n_ff=384, seed=26,
                               rope_base=10_000_000.0, n_expert=8, n_expert_used=2, n_ff_exp=64,
                               extra={"delta": (4, 2, 4, 32), "full_attn_interval": 4,
                                      "rope_dims": 16, "rope_sections": [3, 3, 2, 0],
                                      "shared_ff": 96, "gate_up_fused": True, "mtp": 1}),
    # gpt-oss: even layers on an 8-token window (the longer prompts cross it), odd ones over
    # the whole context; 48-wide heads (query width 192 != n_embd), Q/K/V/O biases, a sink
    # logit per head near the scores (some heads give it much of their weight, some little);
    # NeoX RoPE with YaRN (factor 32 over an original 4096 context: the ramp spans dimension
    # pairs 6 to 14 of 24); 8 MXFP4 experts (top 2 by logit, softmaxed among the two) whose
    # clamped SwiGLU sees gate and up values past its limit of 7; a biased router and biased
    # expert projections.
    "gpt-oss-tiny": Spec("gpt-oss", "vocab:llama-bpe", n_embd=128, n_layer=4, n_head=4,
                         n_head_kv=2, head_dim=48, n_ff=64, seed=17, rope_base=150_000.0,
                         n_ctx_train=131_072, rms_eps=1e-5, n_expert=8, n_expert_used=2,
                         n_ff_exp=64,
                         extra={"sliding_window": 8, "yarn": (32.0, 4096),
                                "expert_type": "MXFP4", "sinks": True, "qk_std": 0.75,
                                "expert_spread": 0.15}),
    # Mistral 3: Llama's layers with YaRN read in full (factor 16 over an original context of
    # 16, its betas moved from 32 and 1 to 2 and 0.25 so the ramp spans pairs 1 to 11 of 32,
    # and a log multiplier of 0.5: a magnitude correction of 1.12 where real files' 1 gives
    # none) and an attention temperature of 0.2 (queries 1.39x at position 96: the longer
    # prompts cross several original contexts); the Tekken pre-tokenizer over the Llama 3 BPE
    # vocabulary.
    "mistral3-tiny": Spec("mistral3", "vocab:llama-bpe", n_embd=128, n_layer=3, n_head=4,
                          n_head_kv=2, head_dim=64, n_ff=256, seed=18, rope_base=1_000.0,
                          rms_eps=1e-5,
                          extra={"yarn": (16.0, 16), "yarn_tuning": (2.0, 0.25, 0.5),
                                 "temperature_scale": 0.2, "pre_tokenizer": "tekken"}),
    # Gemma 4 (dense, E2B-like): sliding and global layers alternating (8-token window, the
    # sliding ones on their own RoPE base; the global ones with `rope_freqs` that slow some
    # pairs and stop the last half, as Gemma 4's proportional RoPE does), values RMS-normed,
    # attention scale 1 (QK-norm weights of 0.4 keep the scores near unit spread), the last two
    # layers reading the KV cache of layers 2 and 3 (KV sharing), layer 3 without `attn_v`
    # (its values are its key projection), per-layer inputs of 32 per layer, a scalar on every
    # layer's output, final soft-cap 30, a tied Q8_0 head; the Gemma 4 vocabulary (262k tokens;
    # its per-layer table in Q4_0). Heads of 32 on the sliding layers beside 64 on the global
    # ones (Gemma 4's 256 and 512), and the two sharing layers' FFNs twice as wide (E2B's).
    "gemma4-tiny": Spec("gemma4", "vocab:gemma-4", n_embd=128, n_layer=6, n_head=4,
                        n_head_kv=2, head_dim=64, n_ff=256, seed=19, rope_base=1_000_000.0,
                        tied_output=True, embd_type="Q8_0", revision=2,
                        extra={"sliding_window": 8, "swa_pattern": [True, False] * 3,
                               "head_dim_swa": 32, "ffn_widths": [256] * 4 + [512] * 2,
                               "rope_base_swa": 10_000.0, "post_norm_scale": 1.0,
                               "final_softcap": 30.0, "shared_kv_layers": 2,
                               "values_from_keys": (3,), "per_layer_input": 32,
                               "qk_norm_scale": 0.4, "gemma4_rope_freqs": True}),
    # Gemma 4's mixture (26B-A4B-like): every layer a dense GELU FFN beside 8 experts (top 2,
    # softmax, renormalised; gate and up in one tensor), each side with its own norms, the
    # router reading the residual's plain norm times a learned scale (about sqrt(n_embd): logits
    # of a few units), each expert's output times its own scale; sliding and global layers,
    # values normed, soft-cap 30. Sliding layers with 2 KV heads of 32, global ones with 1 of
    # 64 whose values are their keys (the 26B's and 31B's global layers have no `attn_v`).
    # The Llama 2 vocabulary keeps it small.
    "gemma4moe-tiny": Spec("gemma4", "vocab:llama-spm", n_embd=128, n_layer=4, n_head=4,
                           n_head_kv=2, head_dim=64, n_ff=128, seed=21, rope_base=1_000_000.0,
                           tied_output=True, n_expert=8, n_expert_used=2, n_ff_exp=64,
                           revision=2,
                           extra={"sliding_window": 8, "swa_pattern": [True, False] * 2,
                                  "head_dim_swa": 32, "kv_heads_global": 1,
                                  "values_from_keys": (1, 3),
                                  "rope_base_swa": 10_000.0, "post_norm_scale": 1.0,
                                  "final_softcap": 30.0, "qk_norm_scale": 0.4,
                                  "gemma4_rope_freqs": True, "gate_up_fused": True,
                                  "expert_spread": 0.15}),
    # For speed: shaped like a small real MoE, 2.0B parameters of which 0.43B active per token
    # (64 experts, top 8). Written in F16 (4 GB); `kolibri quantize` makes the Q4_K_M mix:
    #   kolibri quantize $(scripts/make-synthetic-models.py --path qwen3moe-bench) \
    #       qwen3moe-bench-q4_k_m.gguf Q4_K_M
    # For thread scaling on larger machines: shaped like Qwen3-1.7B (tied head, GQA 2:1), with
    # the vocabulary of llama.cpp's ggml-vocab-qwen2.gguf, so that no real model must be
    # carried there. Written in F16 (3.4 GB); `kolibri quantize ... Q4_K_M` as above.
    "qwen3-bench": Spec("qwen3", "vocab:qwen2", n_embd=2048, n_layer=28, n_head=16,
                        n_head_kv=8, head_dim=128, n_ff=6144, seed=10, tied_output=True,
                        default=False, fast_weights=True),
    # Shaped like a small Qwen3.5 MoE: 1.5B parameters, 0.35B active per token (48 experts of
    # 512, top 4, and a shared one); 12 delta-net layers (16 value heads of 64 over 8 key
    # heads) and 4 gated attention layers (8 heads of 128, 2 KV heads, RoPE on 32
    # dimensions); tied head. F16 (3 GB); `kolibri quantize ... Q4_K_M` as above.
    "qwen35moe-bench": Spec("qwen35moe", "vocab:qwen35", n_embd=1024, n_layer=16, n_head=8,
                            n_head_kv=2, head_dim=128, n_ff=3072, seed=16,
                            rope_base=10_000_000.0, n_expert=48, n_expert_used=4,
                            n_ff_exp=512, tied_output=True, default=False, fast_weights=True,
                            n_ctx_train=262_144,
                            extra={"delta": (4, 8, 16, 64), "full_attn_interval": 4,
                                   "rope_dims": 32, "rope_sections": [6, 5, 5, 0],
                                   "shared_ff": 512, "gate_up_fused": True}),
    # Shaped like a small gpt-oss: 1.9B parameters, 0.41B active per token (32 MXFP4 experts
    # of 1024, top 4; a biased router and experts), 16 layers alternating a 128-token window
    # and full attention (16 heads of 64, 4 KV heads, sinks, YaRN), Q8_0 elsewhere, untied
    # head. About 1.2 GB, written as is (no quantize step).
    "gpt-oss-bench": Spec("gpt-oss", "vocab:llama-bpe", n_embd=1024, n_layer=16, n_head=16,
                          n_head_kv=4, head_dim=64, n_ff=1024, seed=20, rope_base=150_000.0,
                          n_ctx_train=131_072, rms_eps=1e-5, n_expert=32, n_expert_used=4,
                          n_ff_exp=1024, matrix_type="Q8_0", default=False, fast_weights=True,
                          extra={"sliding_window": 128, "yarn": (32.0, 4096),
                                 "expert_type": "MXFP4", "sinks": True}),
    # Shaped like a small Gemma 4 26B-A4B: 0.93B parameters, 0.2B active per token (64
    # experts of 256, top 8, beside a dense FFN of 768, the real model's proportions to its
    # width), 16 layers of which every sixth is global (8 heads of 256, 1 KV head whose values
    # are its keys, `rope_freqs`) and the others slide over 1024 tokens (8 heads of 128, 4 KV
    # heads); tied head over the Llama 2 vocabulary (its share of the per-token bytes near the
    # real model's). F16 (1.9 GB); `kolibri quantize ... Q4_K_M` as above.
    "gemma4moe-bench": Spec("gemma4", "vocab:llama-spm", n_embd=1024, n_layer=16, n_head=8,
                            n_head_kv=4, head_dim=256, n_ff=768, seed=22,
                            rope_base=1_000_000.0, n_ctx_train=131_072, tied_output=True,
                            n_expert=64, n_expert_used=8, n_ff_exp=256, default=False,
                            fast_weights=True,
                            extra={"sliding_window": 1024,
                                   "swa_pattern": [il % 6 != 5 for il in range(16)],
                                   "head_dim_swa": 128, "kv_heads_global": 1,
                                   "values_from_keys": (5, 11), "rope_base_swa": 10_000.0,
                                   "post_norm_scale": 1.0, "final_softcap": 30.0,
                                   "gemma4_rope_freqs": True, "gate_up_fused": True}),
    "qwen3moe-bench": Spec("qwen3moe", "qwen2.5-coder-0.5b", n_embd=1024, n_layer=16,
                           n_head=16, n_head_kv=4, head_dim=128, n_ff=4096, seed=3,
                           n_expert=64, n_expert_used=8, n_ff_exp=512, default=False),
}


# Gemma 4 "assistant" drafters (`gemma4-assistant`, issue 49), each for a target of MODELS: a
# small stack of Q-only layers reading the target's last full and sliding KV layers, fed
# [target embedding * sqrt(B); target hidden] through pre_projection, its own head, and
# post_projection back to the target's width for the next chained draft (llama.cpp's layout:
# ../shared/notes/gemma4-assistant.md). Layer types, head sizes and KV heads follow the target's.
ASSISTANTS = {
    # For gemma4-tiny (B 128): width 64, one sliding and one full layer, FFN 128.
    "gemma4-assistant-tiny": dict(target="gemma4-tiny", n_embd=64, pattern=[True, False],
                                  n_ff=128, seed=27),
    # Agreeing with their targets ("agree"): they read only the next token's embedding
    # (projected), write nothing into their residual stream, and their head maps it to
    # pi(tau(t)), right 9 times in 10 (see `qwen35-mtp-agree-tiny`).
    "gemma4-assistant-agree-tiny": dict(target="gemma4-agree-tiny", n_embd=64,
                                        pattern=[True, False], n_ff=128, seed=31, agree=True),
    "gemma4-assistant-agree-warm-tiny": dict(target="gemma4-agree-warm-tiny", n_embd=64,
                                             pattern=[True, False], n_ff=128, seed=34,
                                             agree=True),
    "gemma4-assistant-agree-bench": dict(target="gemma4-agree-bench", n_embd=512,
                                         pattern=[True, True, True, False], n_ff=2048, seed=32,
                                         agree=True, default=False),
}


def model_dir() -> Path:
    d = os.environ.get("KOLIBRI_MODEL_DIR")
    base = Path(d) if d else Path.home() / ".cache" / "kolibri" / "models"
    return base / "synthetic"


def file_name(name: str, revision: int = 1) -> str:
    rev = f"r{revision}" if revision > 1 else ""
    return f"{name}-v{GENERATOR_VERSION}{rev}.gguf"


# --- deterministic weights -------------------------------------------------------------------

def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, element-wise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def uniform(s: Spec, stream: str, shape, std: float) -> np.ndarray:
    """Uniform values of standard deviation `std`, a pure function of (model seed, stream,
    index); with `s.fast_weights`, of (seed, stream) and the numpy version (PCG64: 5x faster)."""
    key = int.from_bytes(hashlib.sha256(f"{s.seed}/{stream}".encode()).digest()[:8], "little")
    n = int(np.prod(shape))
    if s.fast_weights:
        u = np.random.default_rng(key).random(n, dtype=np.float32)
        return ((2.0 * u - 1.0) * np.float32(std * np.sqrt(3.0))).reshape(shape)
    with np.errstate(over="ignore"):
        idx = np.arange(n, dtype=np.uint64) + np.uint64(key)
    bits = splitmix64(idx) >> np.uint64(40)  # 24 bits
    u = bits.astype(np.float64) / float(1 << 24)  # [0, 1)
    return ((2.0 * u - 1.0) * (std * np.sqrt(3.0))).astype(np.float32).reshape(shape)


# --- writing ---------------------------------------------------------------------------------

def copy_tokenizer(w: "gguf.GGUFWriter", source: Path, pre: str = "") -> int:
    """Copies every tokenizer.* key of `source`, with `pre` as its pre-tokenizer where given;
    returns its vocabulary size."""
    r = gguf.GGUFReader(source)
    n_vocab = 0
    if pre:
        w.add_string("tokenizer.ggml.pre", pre)
    for name, f in r.fields.items():
        if not name.startswith("tokenizer.") or (pre and name == "tokenizer.ggml.pre"):
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
    w.add_tensor(name, (scale * (1.0 + uniform(s, name, (n,), 0.1))).astype(np.float32))


# The projections that write into the residual stream: zero in an agreeing model.
RESIDUAL_WRITERS = ("attn_output", "ssm_out", "ffn_down", "ffn_down_shexp")


def add_linear(w, s: Spec, name: str, rows: int, k: int, out_std: float = 1.0) -> None:
    """A [rows, k] matrix whose outputs have about `out_std` for unit-rms inputs."""
    if "agree" in s.extra and name.rsplit(".", 2)[-2] in RESIDUAL_WRITERS:
        add_matrix(w, name, np.zeros((rows, k), np.float32), s.matrix_type)
        return
    add_matrix(w, name, uniform(s, name, (rows, k), out_std / np.sqrt(k)), s.matrix_type)


class Agreement:
    """An agreeing model's heads (see `qwen35-mtp-agree-tiny`): the target's maps token t to
    pi(t), the block's maps x to pi(tau(x)); rows scaled so the right token's logit is about
    `agree_logit` (12) and the others' about N(0, that / sqrt(n_embd))."""

    def __init__(self, s: Spec, embd: np.ndarray, ordinary: np.ndarray, embd_std: float = 1.0):
        rng = np.random.default_rng(s.seed)
        pi = rng.permutation(ordinary)
        self.head = np.zeros_like(embd)
        scale = s.extra.get("agree_logit", 12.0) / (s.n_embd * embd_std)
        self.head[pi] = embd[ordinary] * scale
        # tau swaps pairs of 1 - rate of the ordinary tokens: those drafts are wrong.
        n_swapped = int(round((1.0 - s.extra["agree"]) * len(ordinary))) // 2 * 2
        swapped = rng.choice(len(ordinary), n_swapped, replace=False)
        a, b = pi[swapped[0::2]], pi[swapped[1::2]]
        self.draft_head = self.head.copy()
        self.draft_head[a], self.draft_head[b] = self.head[b], self.head[a]
        # Per ordinary token t (self.ordinary), what a drafter reading t should predict.
        self.ordinary = ordinary
        self.draft_target = pi.copy()
        i, j = swapped[0::2], swapped[1::2]
        self.draft_target[i], self.draft_target[j] = pi[j], pi[i]


def ordinary_tokens(source: Path) -> np.ndarray:
    """The ids of the tokenizer's ordinary tokens (normal and byte tokens: not control, unused
    or user-defined ones), which an agreeing model's text is made of."""
    r = gguf.GGUFReader(source)
    types = r.fields.get("tokenizer.ggml.token_type")
    n = len(r.fields["tokenizer.ggml.tokens"].data)
    if types is None:
        return np.arange(n)
    kinds = np.array([types.parts[i][0] for i in types.data])
    return np.flatnonzero((kinds == 1) | (kinds == 6))


def write_metadata(w, s: Spec, a: str) -> None:
    """The metadata of `s` as architecture `a` writes it (its own, or its reference twin's)."""
    w.add_string("general.name", f"kolibri synthetic {s.arch}")
    w.add_uint32(f"{a}.context_length", s.n_ctx_train)
    w.add_uint32(f"{a}.embedding_length", s.n_embd)
    w.add_uint32(f"{a}.block_count", s.n_layer + s.extra.get("mtp", 0))
    if "mtp" in s.extra:
        w.add_uint32(f"{a}.nextn_predict_layers", s.extra["mtp"])
    if "ffn_widths" in s.extra:
        w.add_array(f"{a}.feed_forward_length", s.extra["ffn_widths"])
    else:
        w.add_uint32(f"{a}.feed_forward_length", s.n_ff)
    w.add_uint32(f"{a}.attention.head_count", s.n_head)
    if "kv_heads_global" in s.extra:
        w.add_array(f"{a}.attention.head_count_kv", [kv_heads(s, il) for il in range(s.n_layer)])
    elif "conv_layers" in s.extra:
        # Per layer: 0 marks a short-convolution layer (LFM2).
        w.add_array(f"{a}.attention.head_count_kv",
                    [0 if il in s.extra["conv_layers"] else s.n_head_kv
                     for il in range(s.n_layer)])
        w.add_uint32(f"{a}.shortconv.l_cache", s.extra["conv_kernel"])
    else:
        w.add_uint32(f"{a}.attention.head_count_kv", s.n_head_kv)
    if a != "phi3":  # Phi-3's converter leaves the head size to n_embd / n_head
        w.add_uint32(f"{a}.attention.key_length", s.head_dim)
        w.add_uint32(f"{a}.attention.value_length", s.head_dim)
    w.add_float32(f"{a}.rope.freq_base", s.rope_base)
    if a in ("llama", "phi3", "qwen35", "qwen35moe", "mistral3"):
        w.add_uint32(f"{a}.rope.dimension_count", s.extra.get("rope_dims", s.head_dim))
    if "rope_sections" in s.extra:
        w.add_array(f"{a}.rope.dimension_sections", s.extra["rope_sections"])
    if "delta" in s.extra:
        kernel, n_k, n_v, head = s.extra["delta"]
        w.add_uint32(f"{a}.ssm.conv_kernel", kernel)
        w.add_uint32(f"{a}.ssm.state_size", head)
        w.add_uint32(f"{a}.ssm.group_count", n_k)
        w.add_uint32(f"{a}.ssm.time_step_rank", n_v)
        w.add_uint32(f"{a}.ssm.inner_size", n_v * head)
        w.add_uint32(f"{a}.full_attention_interval", s.extra["full_attn_interval"])
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", s.rms_eps)
    if "long_rope" in s.extra:
        # As Phi-3's converter writes LongRoPE: the original context and the attention factor
        # sqrt(1 + ln(scale) / ln(original)).
        orig = s.extra["long_rope"]
        scale = s.n_ctx_train / orig
        w.add_uint32(f"{a}.rope.scaling.original_context_length", orig)
        w.add_float32(f"{a}.rope.scaling.attn_factor",
                      float(np.sqrt(1 + np.log(scale) / np.log(orig))))
    if "sliding_window" in s.extra:
        w.add_uint32(f"{a}.attention.sliding_window", s.extra["sliding_window"])
    if "yarn" in s.extra:
        factor, orig = s.extra["yarn"]
        w.add_string(f"{a}.rope.scaling.type", "yarn")
        w.add_float32(f"{a}.rope.scaling.factor", factor)
        w.add_uint32(f"{a}.rope.scaling.original_context_length", orig)
    if "yarn_tuning" in s.extra:
        beta_fast, beta_slow, log_mul = s.extra["yarn_tuning"]
        w.add_float32(f"{a}.rope.scaling.yarn_beta_fast", beta_fast)
        w.add_float32(f"{a}.rope.scaling.yarn_beta_slow", beta_slow)
        w.add_float32(f"{a}.rope.scaling.yarn_log_multiplier", log_mul)
    if "temperature_scale" in s.extra:
        w.add_float32(f"{a}.attention.temperature_scale", s.extra["temperature_scale"])
    if a == "granite_swa":
        w.add_array(f"{a}.attention.sliding_window_pattern", [True] * s.n_layer)
        w.add_float32(f"{a}.logit_scale", 1.0)
    if "swa_pattern" in s.extra:
        w.add_array(f"{a}.attention.sliding_window_pattern", s.extra["swa_pattern"])
    if "rope_base_swa" in s.extra:
        w.add_float32(f"{a}.rope.freq_base_swa", s.extra["rope_base_swa"])
    if "final_softcap" in s.extra:
        w.add_float32(f"{a}.final_logit_softcapping", s.extra["final_softcap"])
    if "shared_kv_layers" in s.extra:
        w.add_uint32(f"{a}.attention.shared_kv_layers", s.extra["shared_kv_layers"])
    if a == "gemma4":
        swa_dim = s.extra.get("head_dim_swa", s.head_dim)
        w.add_uint32(f"{a}.attention.key_length_swa", swa_dim)
        w.add_uint32(f"{a}.attention.value_length_swa", swa_dim)
        w.add_uint32(f"{a}.rope.dimension_count", s.head_dim)
        w.add_uint32(f"{a}.rope.dimension_count_swa", swa_dim)
        w.add_uint32(f"{a}.embedding_length_per_layer_input", s.extra.get("per_layer_input", 0))
    if "softcap" in s.extra:
        attn, final = s.extra["softcap"]
        w.add_float32(f"{a}.attn_logit_softcapping", attn)
        w.add_float32(f"{a}.final_logit_softcapping", final)
    if s.n_expert:
        w.add_uint32(f"{a}.expert_count", s.n_expert)
        w.add_uint32(f"{a}.expert_used_count", s.n_expert_used)
        if a != "olmoe":
            w.add_uint32(f"{a}.expert_feed_forward_length", s.n_ff_exp)
    if "shared_ff" in s.extra:
        w.add_uint32(f"{a}.expert_shared_feed_forward_length", s.extra["shared_ff"])
    if "reranker" in s.extra:
        w.add_uint32(f"{a}.pooling_type", 4)  # rank
        w.add_array(f"{a}.classifier.output_labels", s.extra["reranker"])
        w.add_string("tokenizer.chat_template.rerank", RERANK_TEMPLATE)
    if "dense_lead" in s.extra:
        w.add_uint32(f"{a}.leading_dense_block_count", s.extra["dense_lead"])
        w.add_uint32(f"{a}.expert_gating_func", 2)  # sigmoid


# Qwen3-Reranker's prompt as llama.cpp's converter records it (`{query}`, `{document}` filled in).
RERANK_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    "and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that "
    "answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)


def write_mtp_parts(w, s: Spec, il: int, agreement: "Agreement | None") -> None:
    """A multi-token-prediction block's own tensors: the norms of the next token's embedding
    and of the trunk's hidden state, their projection [embedding; hidden] -> n_embd, and the
    norm before the shared head; an agreeing model's block reads the embedding alone and has
    a head of its own."""
    e = s.n_embd
    add_norm(w, s, f"blk.{il}.nextn.enorm.weight", e)
    add_norm(w, s, f"blk.{il}.nextn.hnorm.weight", e)
    if agreement is None:
        add_linear(w, s, f"blk.{il}.nextn.eh_proj.weight", e, 2 * e)
    else:
        eh = np.concatenate([np.eye(e, dtype=np.float32), np.zeros((e, e), np.float32)], 1)
        add_matrix(w, f"blk.{il}.nextn.eh_proj.weight", eh, s.matrix_type)
        add_matrix(w, f"blk.{il}.nextn.shared_head_head.weight", agreement.draft_head,
                   s.matrix_type)
    add_norm(w, s, f"blk.{il}.nextn.shared_head_norm.weight", e)


def write_short_conv(w, s: Spec, il: int) -> None:
    """LFM2's token mixer: in_proj to b, c and x (unit rms each), the kernel (taps of about
    1/sqrt(taps), so the convolution of b * x stays near unit rms) and out_proj."""
    e, taps = s.n_embd, s.extra["conv_kernel"]
    n = lambda t: f"blk.{il}.shortconv.{t}"  # noqa: E731
    add_linear(w, s, n("in_proj.weight"), 3 * e, e)
    w.add_tensor(n("conv.weight"), uniform(s, n("conv.weight"), (e, taps), 1.0 / np.sqrt(taps)))
    add_linear(w, s, n("out_proj.weight"), e, e)


def write_delta_net(w, s: Spec, il: int) -> None:
    """Qwen3.5's Gated DeltaNet: q, k, v through a causal convolution (taps of about
    1/sqrt(taps)), decays exp(softplus(alpha + dt) * a) mostly between 0.6 and 0.95, write
    strengths sigmoid(beta) around 0.5, a gated norm and the output projection."""
    e = s.n_embd
    kernel, n_k, n_v, head = s.extra["delta"]
    conv_dim = 2 * n_k * head + n_v * head
    n = lambda t: f"blk.{il}.{t}"  # noqa: E731
    add_linear(w, s, n("attn_qkv.weight"), conv_dim, e)
    add_linear(w, s, n("attn_gate.weight"), n_v * head, e)
    add_linear(w, s, n("ssm_beta.weight"), n_v, e)
    add_linear(w, s, n("ssm_alpha.weight"), n_v, e)
    w.add_tensor(n("ssm_conv1d.weight"),
                 uniform(s, n("ssm_conv1d.weight"), (conv_dim, kernel), 1.0 / np.sqrt(kernel)))
    w.add_tensor(n("ssm_dt.bias"), uniform(s, n("ssm_dt.bias"), (n_v,), 0.5))
    # a = -exp(A_log), A_log around ln(0.3).
    a_log = np.log(0.3) + uniform(s, n("ssm_a"), (n_v,), 0.5)
    w.add_tensor(n("ssm_a"), (-np.exp(a_log)).astype(np.float32))
    add_norm(w, s, n("ssm_norm.weight"), head)
    add_linear(w, s, n("ssm_out.weight"), e, n_v * head)


def sliding(s: Spec, il: int) -> bool:
    pattern = s.extra.get("swa_pattern", [])
    return il < len(pattern) and bool(pattern[il])


def kv_heads(s: Spec, il: int) -> int:
    """Layer il's KV heads: `kv_heads_global` on Gemma 4's global layers where set."""
    if not sliding(s, il) and "kv_heads_global" in s.extra:
        return s.extra["kv_heads_global"]
    return s.n_head_kv


def head_dim(s: Spec, il: int) -> int:
    """Layer il's head size: `head_dim_swa` on sliding layers where set (Gemma 4)."""
    return s.extra.get("head_dim_swa", s.head_dim) if sliding(s, il) else s.head_dim


def ffn_width(s: Spec, il: int) -> int:
    return s.extra["ffn_widths"][il] if "ffn_widths" in s.extra else s.n_ff


def write_layer(w, s: Spec, il: int, a: str) -> None:
    e, hd = s.n_embd, head_dim(s, il)
    q_dim, kv_dim = s.n_head * hd, kv_heads(s, il) * hd
    n = lambda t: f"blk.{il}.{t}"  # noqa: E731
    add_norm(w, s, n("attn_norm.weight"), e)
    # Multi-token-prediction blocks (after the trunk) are full-attention layers.
    if "delta" in s.extra and il < s.n_layer and (il + 1) % s.extra["full_attn_interval"] != 0:
        write_delta_net(w, s, il)
        delta = True
    else:
        delta = False
    if delta:
        pass
    elif il in s.extra.get("conv_layers", ()):
        write_short_conv(w, s, il)
    elif s.arch == "gemma4" and il >= s.n_layer - s.extra.get("shared_kv_layers", 0):
        # Reads an earlier layer's KV cache: queries only.
        add_linear(w, s, n("attn_q.weight"), q_dim, e)
    elif a == "phi3":
        # One matrix, Q rows then K then V (each part drawn as its own matrix would be).
        add_matrix(w, n("attn_qkv.weight"), np.concatenate(
            [uniform(s, n(f"attn_{p}.weight"), (rows, e), 1.0 / np.sqrt(e))
             for p, rows in (("q", q_dim), ("k", kv_dim), ("v", kv_dim))]), s.matrix_type)
    else:
        # qk_std: queries and keys larger than unit rms, so the attention scores reach the
        # range a soft-cap bends (scores of about qk_std² before the cap).
        qk = s.extra.get("qk_std", 1.0)
        # Qwen3.5: per head its queries, then as many output gate values.
        q_rows = 2 * q_dim if s.arch.startswith("qwen35") else q_dim
        add_linear(w, s, n("attn_q.weight"), q_rows, e, out_std=qk)
        add_linear(w, s, n("attn_k.weight"), kv_dim, e, out_std=qk)
        if il not in s.extra.get("values_from_keys", ()):
            add_linear(w, s, n("attn_v.weight"), kv_dim, e)
    conv = il in s.extra.get("conv_layers", ()) or delta
    if not conv:
        add_linear(w, s, n("attn_output.weight"), e, q_dim)
    if a == "granite_swa":
        # Sink logits far below every score: exp(-30 - max) adds nothing to the softmax.
        w.add_tensor(n("attn_sinks.weight"), np.full((s.n_head,), -30.0, dtype=np.float32))
    if s.extra.get("sinks"):
        # Sinks around the scores' range (about unit spread): each head weighs it differently.
        name = n("attn_sinks.weight")
        w.add_tensor(name, (0.5 + uniform(s, name, (s.n_head,), 1.0)).astype(np.float32))
    if "post_norm_scale" in s.extra:
        # Post-norms set each block's share of the residual stream (Gemma's embeddings enter
        # at unit rms, and a tied head favours the current token by its share).
        add_norm(w, s, n("post_attention_norm.weight"), e, s.extra["post_norm_scale"])
    if s.arch in ("qwen2moe", "gpt-oss"):
        # Biases of about a tenth of the projections' outputs.
        outputs = (("output", e),) if s.arch == "gpt-oss" else ()
        for part, size in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)) + outputs:
            name = n(f"attn_{part}.bias")
            w.add_tensor(name, uniform(s, name, (size,), 0.1))
    if s.arch in ("qwen3", "qwen3moe", "lfm2", "lfm2moe", "qwen35", "qwen35moe") and not conv:
        add_norm(w, s, n("attn_q_norm.weight"), hd)
        add_norm(w, s, n("attn_k_norm.weight"), hd)
    if s.arch == "gemma4":
        qk_scale = s.extra.get("qk_norm_scale", 1.0)
        add_norm(w, s, n("attn_q_norm.weight"), hd, qk_scale)
        if il < s.n_layer - s.extra.get("shared_kv_layers", 0):
            add_norm(w, s, n("attn_k_norm.weight"), hd, qk_scale)
    if s.arch == "olmoe":
        add_norm(w, s, n("attn_q_norm.weight"), q_dim)
        add_norm(w, s, n("attn_k_norm.weight"), kv_dim)
    # Qwen3.5's and gpt-oss's FFN norm is named post_attention_norm.
    ffn_norm = ("post_attention_norm.weight" if s.arch.startswith("qwen35") or s.arch == "gpt-oss"
                else "ffn_norm.weight")
    add_norm(w, s, n(ffn_norm), e)
    if "post_norm_scale" in s.extra:
        add_norm(w, s, n("post_ffw_norm.weight"), e, s.extra["post_norm_scale"])
    if a == "phi3":
        # Gate rows first, then up.
        add_matrix(w, n("ffn_up.weight"), np.concatenate(
            [uniform(s, n(f"ffn_{p}.weight"), (s.n_ff, e), 1.0 / np.sqrt(e))
             for p in ("gate", "up")]), s.matrix_type)
        add_linear(w, s, n("ffn_down.weight"), e, s.n_ff, out_std=2.0)
        return
    if "per_layer_input" in s.extra:
        p = s.extra["per_layer_input"]
        add_linear(w, s, n("inp_gate.weight"), p, e)
        add_linear(w, s, n("proj.weight"), e, p, out_std=2.0)
        add_norm(w, s, n("post_norm.weight"), e)
    if s.arch == "gemma4":
        # Between 0.6 and 1: each layer's output shrunk by its own factor.
        name = n("layer_output_scale.weight")
        w.add_tensor(name, (0.8 + uniform(s, name, (1,), 0.1)).astype(np.float32))
    if s.arch == "gemma4" and s.n_expert:
        # The dense FFN beside the experts, the norms of both sides, the router's input scale
        # and each expert's output scale.
        add_linear(w, s, n("ffn_gate.weight"), ffn_width(s, il), e)
        add_linear(w, s, n("ffn_up.weight"), ffn_width(s, il), e)
        add_linear(w, s, n("ffn_down.weight"), e, ffn_width(s, il), out_std=2.0)
        for norm in ("post_ffw_norm_1", "pre_ffw_norm_2", "post_ffw_norm_2"):
            add_norm(w, s, n(f"{norm}.weight"), e)
        add_norm(w, s, n("ffn_gate_inp.scale"), e, float(np.sqrt(e)))
        name = n("ffn_down_exps.scale")
        w.add_tensor(name, (1.0 + uniform(s, name, (s.n_expert,), 0.3)).astype(np.float32))
    if s.n_expert == 0 or il < s.extra.get("dense_lead", 0):
        add_linear(w, s, n("ffn_gate.weight"), ffn_width(s, il), e)
        add_linear(w, s, n("ffn_up.weight"), ffn_width(s, il), e)
        # silu(gate) * up has about 0.5 rms for unit inputs.
        add_linear(w, s, n("ffn_down.weight"), e, ffn_width(s, il), out_std=2.0)
        return
    # The router: logits of a few units, so the top-k choice is clear (ties would make the
    # reference arbitrary) but not one-hot.
    w.add_tensor(n("ffn_gate_inp.weight"),
                 uniform(s, n("ffn_gate_inp.weight"), (s.n_expert, e), 2.0 / np.sqrt(e)))
    if "dense_lead" in s.extra:
        # A selection bias of about a tenth of the sigmoid scores' spread: it changes some
        # choices without deciding them all.
        w.add_tensor(n("exp_probs_b.bias"), uniform(s, n("exp_probs_b.bias"), (s.n_expert,), 0.03))
    if s.arch == "gpt-oss":
        # Router and expert biases of about a tenth of their outputs' spread.
        name = n("ffn_gate_inp.bias")
        w.add_tensor(name, uniform(s, name, (s.n_expert,), 0.2))
        for part, width in (("gate", s.n_ff_exp), ("up", s.n_ff_exp), ("down", e)):
            name = n(f"ffn_{part}_exps.bias")
            w.add_tensor(name, uniform(s, name, (s.n_expert, width), 0.1))
    f = s.n_ff_exp
    # gpt-oss: gate and up of 3x unit rms (the clamp at 7 bites on a few percent of them), and
    # a down projection that brings the clamped SwiGLU's larger outputs back to about 1.
    gate_std, down_std = (2.5, 0.1) if s.arch == "gpt-oss" else (1.0, 2.0)
    expert_type = s.extra.get("expert_type", s.matrix_type)
    parts = {}
    # expert_spread: each expert a shared matrix plus its own part of this relative size, so
    # that a near tie in the router (which engines may break either way, gpt-oss weighing only
    # the chosen experts) moves the output little.
    spread = s.extra.get("expert_spread", 0.0)
    for part, rows, k, std in (("gate", f, e, gate_std), ("up", f, e, gate_std),
                               ("down", e, f, down_std)):
        name = n(f"ffn_{part}_exps.weight")
        parts[part] = uniform(s, name, (s.n_expert, rows, k), std / np.sqrt(k))
        if spread:
            shared = uniform(s, name + "/shared", (1, rows, k), std / np.sqrt(k))
            parts[part] = (shared + spread * parts[part]) / np.sqrt(1 + spread * spread)
    if s.extra.get("gate_up_fused"):
        # Per expert its gate rows, then its up rows.
        add_matrix(w, n("ffn_gate_up_exps.weight"),
                   np.concatenate([parts["gate"], parts["up"]], axis=1), expert_type)
    else:
        for part in ("gate", "up"):
            add_matrix(w, n(f"ffn_{part}_exps.weight"), parts[part], expert_type)
    add_matrix(w, n("ffn_down_exps.weight"), parts["down"], expert_type)
    if "shared_ff" in s.extra:
        f = s.extra["shared_ff"]
        name = n("ffn_gate_inp_shexp.weight")
        # A gate logit of about one unit: the shared expert's share varies token by token.
        w.add_tensor(name, uniform(s, name, (e,), 1.0 / np.sqrt(e)))
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


def long_rope_factors(s: Spec) -> dict:
    """LongRoPE divisors shaped like Phi-3's: the long ones rising from 1 to 16 over the
    dimension pairs, the short ones within 10% of 1."""
    x = np.arange(s.extra["rope_dims"] // 2, dtype=np.float32) / (s.extra["rope_dims"] // 2 - 1)
    return {"rope_factors_long.weight": (1.0 + 15.0 * x * x).astype(np.float32),
            "rope_factors_short.weight": (1.0 + 0.1 * x).astype(np.float32)}


def embedding_std(s: Spec) -> float:
    """The token embeddings' spread: unit variance, or unit rms once scaled by sqrt(n_embd)
    where the architecture scales them (Gemma)."""
    return 1.0 / np.sqrt(s.n_embd) if s.arch.startswith("gemma") else 1.0


def build(name: str, out: Path, a: str, split_max_tensors: int = 0) -> None:
    """Writes model `name` as architecture `a` (its own, or its reference twin's); with
    `split_max_tensors`, in parts as gguf-py splits (the same weights): `out` is then a folder
    of `STEM-0000N-of-0000M.gguf` files (under `split/`, apart from the single files)."""
    s = MODELS[name]
    tmp = out.with_suffix(".partial")
    if split_max_tensors:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        w = gguf.GGUFWriter(tmp / out.name, a, split_max_tensors=split_max_tensors)
    else:
        w = gguf.GGUFWriter(tmp, a)
    write_metadata(w, s, a)
    n_vocab = copy_tokenizer(w, tokenizer_source(s), s.extra.get("pre_tokenizer", ""))
    # Logits of about 4 nat of spread: top-1/top-2 gaps mostly well above rounding noise, and
    # log-probabilities that are not all 0 or -inf. Unit-variance embeddings, except where the
    # architecture scales them by sqrt(n_embd) (Gemma): there they enter at unit rms. A tied
    # head's rows keep that variance, so the final norm scales the hidden state to 4 / their
    # norm.
    embd_std = embedding_std(s)
    embd = uniform(s, "token_embd", (n_vocab, s.n_embd), embd_std)
    add_matrix(w, "token_embd.weight", embd, s.embd_type or s.matrix_type)
    agreement = None
    if "agree" in s.extra:
        agreement = Agreement(s, embd, ordinary_tokens(tokenizer_source(s)), embd_std)
    head_scale = 4.0 / (embd_std * np.sqrt(s.n_embd)) if s.tied_output else 1.0
    # LFM2's converter names the final norm token_embd_norm.
    output_norm = "token_embd_norm.weight" if s.arch.startswith("lfm2") else "output_norm.weight"
    add_norm(w, s, output_norm, s.n_embd, head_scale)
    if agreement is not None:
        add_matrix(w, "output.weight", agreement.head, s.matrix_type)
    elif not s.tied_output:
        add_linear(w, s, "output.weight", n_vocab, s.n_embd, out_std=4.0)
    if "reranker" in s.extra:
        # Scores of a few nat: softmax(head · h)[0] spread over (0, 1), not all 0 or 1.
        add_linear(w, s, "cls.output.weight", len(s.extra["reranker"]), s.n_embd, out_std=2.0)
    if "llama3_rope" in s.extra:
        w.add_tensor("rope_freqs.weight", llama3_rope_freqs(s))
    if s.extra.get("gemma4_rope_freqs"):
        # Pairs 0-7 as they are, 8-15 four times slower, the rest (1e30) not turning.
        pairs = s.head_dim // 2
        freqs = [1.0] * (pairs // 4) + [4.0] * (pairs // 4) + [1e30] * (pairs - pairs // 2)
        w.add_tensor("rope_freqs.weight", np.array(freqs, dtype=np.float32))
    if "per_layer_input" in s.extra:
        p = s.extra["per_layer_input"]
        width = p * s.n_layer
        # Table rows of unit rms once scaled by sqrt(p), as llama.cpp scales them.
        add_matrix(w, "per_layer_token_embd.weight",
                   uniform(s, "per_layer_token_embd", (n_vocab, width), 1.0 / np.sqrt(p)), "Q4_0")
        add_linear(w, s, "per_layer_model_proj.weight", width, s.n_embd)
        add_norm(w, s, "per_layer_proj_norm.weight", p)
    if "long_rope" in s.extra:
        for tensor, values in long_rope_factors(s).items():
            w.add_tensor(tensor, values)
    for il in range(s.n_layer):
        write_layer(w, s, il, a)
    for il in range(s.n_layer, s.n_layer + s.extra.get("mtp", 0)):
        write_layer(w, s, il, a)
        write_mtp_parts(w, s, il, agreement)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(out)


def build_assistant(name: str, out: Path) -> None:
    """Writes the assistant drafter `name` of ASSISTANTS for its target's shapes."""
    spec = ASSISTANTS[name]
    t = MODELS[spec["target"]]
    d, b, pattern = spec["n_embd"], t.n_embd, spec["pattern"]
    # The target's weights' conventions (uniform(), norms) with the assistant's own seed.
    extra = {"head_dim_swa": t.extra.get("head_dim_swa")}
    if spec.get("agree"):
        extra["agree"] = t.extra["agree"]
    s = Spec(t.arch, t.tokenizer_from, n_embd=d, n_layer=len(pattern), n_head=t.n_head,
             n_head_kv=t.n_head_kv, head_dim=t.head_dim, n_ff=spec["n_ff"], seed=spec["seed"],
             rope_base=t.rope_base, fast_weights=t.fast_weights, extra=extra)
    a = "gemma4-assistant"
    tmp = out.with_suffix(".partial")
    w = gguf.GGUFWriter(tmp, a)
    w.add_string("general.name", "kolibri synthetic gemma4-assistant")
    w.add_uint32(f"{a}.context_length", t.n_ctx_train)
    w.add_uint32(f"{a}.embedding_length", d)
    w.add_uint32(f"{a}.embedding_length_out", b)
    w.add_uint32(f"{a}.block_count", len(pattern))
    w.add_uint32(f"{a}.nextn_predict_layers", len(pattern))
    w.add_uint32(f"{a}.feed_forward_length", s.n_ff)
    w.add_uint32(f"{a}.attention.head_count", s.n_head)
    w.add_array(f"{a}.attention.head_count_kv", [s.n_head_kv] * len(pattern))
    swa_dim = t.extra.get("head_dim_swa", t.head_dim)
    for key, value in (("key_length", t.head_dim), ("value_length", t.head_dim),
                       ("key_length_swa", swa_dim), ("value_length_swa", swa_dim),
                       ("sliding_window", t.extra["sliding_window"])):
        w.add_uint32(f"{a}.attention.{key}", value)
    w.add_array(f"{a}.attention.sliding_window_pattern", pattern)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", t.rms_eps)
    w.add_float32(f"{a}.rope.freq_base", t.rope_base)
    w.add_float32(f"{a}.rope.freq_base_swa", t.extra["rope_base_swa"])
    w.add_uint32(f"{a}.rope.dimension_count", t.head_dim)
    w.add_uint32(f"{a}.rope.dimension_count_swa", swa_dim)
    n_vocab = copy_tokenizer(w, tokenizer_source(t))
    if spec.get("agree"):
        # It reads the target's embedding of t (unit rms once scaled) through P alone, and
        # its head maps P·e(t) (normed) to the token the target's drafter should draft.
        target_embd = uniform(t, "token_embd", (n_vocab, b), embedding_std(t)) * np.sqrt(b)
        agreement = Agreement(t, target_embd, ordinary_tokens(tokenizer_source(t)))
        proj = uniform(s, "nextn.pre_projection.weight", (d, b), 1.0 / np.sqrt(b))
        seen = target_embd[agreement.ordinary] @ proj.T
        seen /= np.sqrt((seen * seen).mean(axis=1, keepdims=True))
        head = np.zeros((n_vocab, d), np.float32)
        head[agreement.draft_target] = seen * (12.0 / d)
        add_matrix(w, "token_embd.weight", head, s.matrix_type)
        add_norm(w, s, "output_norm.weight", d)
        pre = np.concatenate([proj, np.zeros((d, b), np.float32)], 1)
        add_matrix(w, "nextn.pre_projection.weight", pre, s.matrix_type)
    else:
        # The head: logits of a few nat for unit-rms inputs.
        add_linear(w, s, "token_embd.weight", n_vocab, d, out_std=4.0)
        add_norm(w, s, "output_norm.weight", d)
        add_linear(w, s, "nextn.pre_projection.weight", d, 2 * b)
    add_linear(w, s, "nextn.post_projection.weight", b, d)
    pairs = t.head_dim // 2
    freqs = [1.0] * (pairs // 4) + [4.0] * (pairs // 4) + [1e30] * (pairs - pairs // 2)
    w.add_tensor("rope_freqs.weight", np.array(freqs, dtype=np.float32))
    for il, sliding in enumerate(pattern):
        hd = swa_dim if sliding else t.head_dim
        n = lambda x: f"blk.{il}.{x}"  # noqa: E731
        add_norm(w, s, n("attn_norm.weight"), d)
        add_linear(w, s, n("attn_q.weight"), s.n_head * hd, d)
        add_norm(w, s, n("attn_q_norm.weight"), hd, t.extra.get("qk_norm_scale", 1.0))
        add_linear(w, s, n("attn_output.weight"), d, s.n_head * hd)
        add_norm(w, s, n("post_attention_norm.weight"), d)
        add_norm(w, s, n("ffn_norm.weight"), d)
        add_linear(w, s, n("ffn_gate.weight"), s.n_ff, d)
        add_linear(w, s, n("ffn_up.weight"), s.n_ff, d)
        add_linear(w, s, n("ffn_down.weight"), d, s.n_ff, out_std=2.0)
        add_norm(w, s, n("post_ffw_norm.weight"), d)
        name = n("layer_output_scale.weight")
        w.add_tensor(name, (0.8 + uniform(s, name, (1,), 0.1)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(out)


def assistant_path_of(name: str) -> Path:
    """The assistant drafter `name`'s file; built if missing."""
    out = model_dir() / file_name(name)
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"building {out.name}...", file=sys.stderr)
        build_assistant(name, out)
    return out


# Written in parts too, by gguf-py's own split writer (what convert_hf_to_gguf.py --split-max-*
# uses): tests/split_gguf.rs loads them and compares with the single file.
SPLIT_MODELS = {"qwen3-tiny": 12}


def split_path_of(name: str) -> Path:
    """The first part of model `name` split by gguf-py; built if missing."""
    s = MODELS[name]
    stem = Path(file_name(name, s.revision)).stem
    out = model_dir() / "split" / stem
    if not out.exists():
        print(f"building {out.name}...", file=sys.stderr)
        build(name, out, s.arch, split_max_tensors=SPLIT_MODELS[name])
    return sorted(out.glob("*-00001-of-*.gguf"))[0]


def path_of(name: str, reference: bool = False) -> Path:
    """The model's file, or with `reference` the file llama.cpp runs for it (its twin if it
    has one); built if missing."""
    s = MODELS[name]
    arch = s.reference_arch if reference else ""
    out = model_dir() / file_name(f"{name}-as-{arch}" if arch else name, s.revision)
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"building {out.name}...", file=sys.stderr)
        build(name, out, arch or MODELS[name].arch)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--path", metavar="NAME", help="print the model's path, building it if missing")
    ap.add_argument("--reference-path", metavar="NAME",
                    help="print the path of the file llama.cpp's reference runs on (the model, "
                         "or its twin), building it if missing")
    ap.add_argument("--split-path", metavar="NAME",
                    help="print the first part of the model written in parts, building it if "
                         "missing")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for name, s in MODELS.items():
            print(f"{name}\t{s.arch}\t{'test' if s.default else 'on request'}")
        for name in ASSISTANTS:
            print(f"{name}\tgemma4-assistant\tassistant drafter")
        return
    if args.path in ASSISTANTS:
        print(assistant_path_of(args.path))
        return
    for name, reference in ((args.path, False), (args.reference_path, True)):
        if name:
            if name not in MODELS:
                sys.exit(f"unknown synthetic model {name!r}; --list shows them")
            print(path_of(name, reference))
            return
    if args.split_path:
        if args.split_path not in SPLIT_MODELS:
            sys.exit(f"{args.split_path!r} is not written in parts; those are {list(SPLIT_MODELS)}")
        print(split_path_of(args.split_path))
        return
    names = args.only.split(",") if args.only else [n for n, s in MODELS.items() if s.default]
    for name in names:
        if name in ASSISTANTS:
            print(assistant_path_of(name))
            continue
        if name not in MODELS:
            sys.exit(f"unknown synthetic model {name!r}; --list shows them")
        print(path_of(name))
    if not args.only:
        for name in SPLIT_MODELS:
            print(split_path_of(name))
        for name, spec in ASSISTANTS.items():
            if spec.get("default", True):
                print(assistant_path_of(name))


if __name__ == "__main__":
    main()
