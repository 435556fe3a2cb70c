#!/usr/bin/env python3
"""Independent float64 NumPy reference forward pass for the Llama-style MoE checkpoints of
Hugging Face transformers other than Qwen3: ``mixtral`` (Mixtral-8x7B/8x22B), ``olmoe`` (OLMoE-1B-7B)
and ``qwen2_moe`` (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B).

Like ``qwen3_moe.py`` (whose safetensors reader and small math helpers it reuses, all of them
independent of the engine: nothing under ``src/`` is imported or parsed), it reads a Hugging
Face model directory and computes everything in float64. The math follows transformers v4.57:

mixtral (modeling_mixtral.py):
    x = embed_tokens[ids]
    for each layer:
        h = RMSNorm(x)                                          # input_layernorm
        q, k, v = h Wq^T, h Wk^T, h Wv^T                        # no biases
        q, k = RoPE(q), RoPE(k)                                 # rotate_half layout
        attn = causal softmax(q k^T / sqrt(head_dim)) v, GQA; when config.sliding_window is set,
               EVERY layer masks keys with q - k >= sliding_window (create_sliding_window_causal_mask)
        x = x + attn Wo^T
        h = RMSNorm(x)                                          # post_attention_layernorm
        p = softmax(h Wgate^T) over all experts (block_sparse_moe.gate), top-k (2), renormalised
        out = sum_k p_k * w2(silu(w1 h) * w3 h)                 # block_sparse_moe.experts.{e}
        x = x + out
    logits = RMSNorm(x) @ lm_head^T

olmoe (modeling_olmoe.py): as mixtral, except
    head_dim = hidden_size / num_attention_heads (always)
    q = RMSNorm(h Wq^T) over the WHOLE projection (heads * head_dim, self_attn.q_norm), k likewise
        (kv_heads * head_dim, self_attn.k_norm); v = h Wv^T; if clip_qkv: q, k, v clamped to
        [-clip_qkv, clip_qkv]; then RoPE; no sliding window
    router: mlp.gate, softmax over all experts, top-k, renormalised only if norm_topk_prob
        (false as released); experts mlp.experts.{e}.{gate,up,down}_proj

qwen2_moe (modeling_qwen2_moe.py): as mixtral, except
    q/k/v projections have biases when qkv_bias (default true); o_proj never
    layer i is MoE iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0, else a dense
        SwiGLU mlp.{gate,up,down}_proj
    MoE: router mlp.gate, softmax, top-k, renormalised only if norm_topk_prob (false as released),
        experts mlp.experts.{e}.*; plus sigmoid(h . mlp.shared_expert_gate) * shared_expert(h)
    no sliding window (use_sliding_window must be false)

Choices (as in qwen3_moe.py): float64 everywhere (HF runs the router softmax in float32), top-k
ties to the lowest expert index, greedy ties to the lowest token id.

Usage (CLI):
    /usr/bin/python3 tools/reference/llama_moe.py MODEL_DIR --tokens 1,2,3 [--greedy N] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_moe import TensorStore, apply_rope, rms_norm, rope_cos_sin, rope_inv_freq, silu, softmax  # noqa: E402

SUPPORTED = ("mixtral", "olmoe", "qwen2_moe")


@dataclasses.dataclass
class Config:
    model_type: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool
    num_experts: int
    num_experts_per_tok: int
    expert_ffn: int
    norm_topk_prob: bool
    sliding_window: Optional[int]
    qkv_bias: bool = False
    clip_qkv: Optional[float] = None
    shared_expert_ffn: int = 0
    dense_ffn: int = 0
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple = ()

    def is_moe_layer(self, i: int) -> bool:
        return i not in self.mlp_only_layers and (i + 1) % self.decoder_sparse_step == 0

    @staticmethod
    def from_dict(d: dict) -> "Config":
        mt = d.get("model_type")
        if mt not in SUPPORTED:
            raise ValueError(f"model_type {mt!r} is not one of {SUPPORTED}")
        if d.get("hidden_act", "silu") != "silu":
            raise NotImplementedError(f"hidden_act {d.get('hidden_act')!r}")
        if d.get("rope_scaling"):
            raise NotImplementedError("rope_scaling is not implemented in this reference")
        heads = int(d["num_attention_heads"])
        head_dim = d.get("head_dim") or int(d["hidden_size"]) // heads
        if mt == "olmoe":
            head_dim = int(d["hidden_size"]) // heads  # OLMoE ignores a head_dim key
        if mt == "qwen2_moe" and d.get("use_sliding_window", False):
            raise NotImplementedError("use_sliding_window=true is not supported by the reference")
        experts_key = "num_local_experts" if mt == "mixtral" else "num_experts"
        return Config(
            model_type=mt,
            vocab_size=int(d["vocab_size"]),
            hidden_size=int(d["hidden_size"]),
            num_hidden_layers=int(d["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(d.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-6 if mt == "qwen2_moe" else 1e-5)),
            rope_theta=float(d.get("rope_theta", 1e6 if mt == "mixtral" else 1e4)),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            num_experts=int(d[experts_key]),
            num_experts_per_tok=int(d["num_experts_per_tok"]),
            expert_ffn=int(d["moe_intermediate_size"] if mt == "qwen2_moe" else d["intermediate_size"]),
            norm_topk_prob=True if mt == "mixtral" else bool(d.get("norm_topk_prob", False)),
            sliding_window=d.get("sliding_window") if mt == "mixtral" else None,
            qkv_bias=bool(d.get("qkv_bias", True)) if mt == "qwen2_moe" else bool(d.get("attention_bias", False)),
            clip_qkv=d.get("clip_qkv") if mt == "olmoe" else None,
            shared_expert_ffn=int(d.get("shared_expert_intermediate_size", 0)) if mt == "qwen2_moe" else 0,
            dense_ffn=int(d.get("intermediate_size", 0)) if mt == "qwen2_moe" else 0,
            decoder_sparse_step=int(d.get("decoder_sparse_step", 1) or 1) if mt == "qwen2_moe" else 1,
            mlp_only_layers=tuple(int(i) for i in (d.get("mlp_only_layers") or [])) if mt == "qwen2_moe" else (),
        )


def route(router_logits: np.ndarray, top_k: int, renormalise: bool):
    """softmax over all experts, top-k by probability (ties: lowest index), optionally renormalised."""
    probs = softmax(router_logits, axis=-1)
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(probs, order, axis=-1)
    if renormalise:
        weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return order.astype(np.int64), weights


class Model:
    def __init__(self, model_dir: str, config: Config, store: TensorStore):
        self.model_dir = model_dir
        self.config = config
        self.store = store
        self._cache: Dict[str, np.ndarray] = {}

    def w(self, name: str) -> np.ndarray:
        t = self._cache.get(name)
        if t is None:
            if name not in self.store:
                raise KeyError(f"{self.model_dir}: missing tensor {name}")
            t = self.store.get(name)
            self._cache[name] = t
        return t

    def _swiglu(self, h, prefix, gate, up, down):
        return (silu(h @ self.w(prefix + gate + ".weight").T) * (h @ self.w(prefix + up + ".weight").T)) @ \
            self.w(prefix + down + ".weight").T

    # mixtral: block_sparse_moe, experts w1 (gate) / w3 (up) / w2 (down); the others mlp.*_proj
    def _expert(self, h, prefix):
        if self.config.model_type == "mixtral":
            return self._swiglu(h, prefix, "w1", "w3", "w2")
        return self._swiglu(h, prefix, "gate_proj", "up_proj", "down_proj")

    def _proj(self, h, name, bias):
        y = h @ self.w(name + ".weight").T
        return y + self.w(name + ".bias") if bias else y

    def attention(self, layer: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        c = self.config
        T = h.shape[0]
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        p = f"model.layers.{layer}.self_attn."
        b = c.qkv_bias
        q, k, v = self._proj(h, p + "q_proj", b), self._proj(h, p + "k_proj", b), self._proj(h, p + "v_proj", b)
        if c.model_type == "olmoe":
            q = rms_norm(q, self.w(p + "q_norm.weight"), c.rms_norm_eps)
            k = rms_norm(k, self.w(p + "k_norm.weight"), c.rms_norm_eps)
            if c.clip_qkv is not None:
                q, k, v = (np.clip(t, -c.clip_qkv, c.clip_qkv) for t in (q, k, v))
        q, k, v = q.reshape(T, nh, hd), k.reshape(T, nkv, hd), v.reshape(T, nkv, hd)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        rep = nh // nkv
        k = np.repeat(k, rep, axis=1)
        v = np.repeat(v, rep, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * (hd ** -0.5)
        qi = np.arange(T)[:, None]
        ki = np.arange(T)[None, :]
        allowed = ki <= qi
        if c.sliding_window is not None:
            allowed &= ki > qi - int(c.sliding_window)
        scores = np.where(allowed[None, :, :], scores, -np.inf)
        out = np.einsum("hqk,khd->qhd", softmax(scores, axis=-1), v).reshape(T, nh * hd)
        return self._proj(out, p + "o_proj", c.qkv_bias and c.model_type == "olmoe")

    def moe(self, layer: int, h: np.ndarray):
        c = self.config
        p = f"model.layers.{layer}." + ("block_sparse_moe." if c.model_type == "mixtral" else "mlp.")
        router_logits = h @ self.w(p + "gate.weight").T
        experts, weights = route(router_logits, c.num_experts_per_tok, c.norm_topk_prob)
        out = np.zeros_like(h)
        for e in np.unique(experts):
            rows, slot = np.nonzero(experts == e)
            out[rows] += self._expert(h[rows], p + f"experts.{int(e)}.") * weights[rows, slot][:, None]
        if c.shared_expert_ffn:
            gate = 1.0 / (1.0 + np.exp(-(h @ self.w(p + "shared_expert_gate.weight").T)))  # [T, 1]
            out = out + gate * self._swiglu(h, p + "shared_expert.", "gate_proj", "up_proj", "down_proj")
        return out

    def ffn(self, layer: int, h: np.ndarray):
        if self.config.is_moe_layer(layer):
            return self.moe(layer, h)
        return self._swiglu(h, f"model.layers.{layer}.mlp.", "gate_proj", "up_proj", "down_proj")

    def forward(self, ids: Sequence[int]) -> np.ndarray:
        """Logits [T, vocab] (float64) for every position of ``ids``."""
        c = self.config
        ids = np.asarray(list(ids), dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token id out of range [0, {c.vocab_size})")
        inv_freq, _ = rope_inv_freq(c.head_dim, c.rope_theta)
        cos, sin = rope_cos_sin(np.arange(ids.size), inv_freq)
        x = self.w("model.embed_tokens.weight")[ids]
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            x = x + self.attention(i, rms_norm(x, self.w(p + "input_layernorm.weight"), c.rms_norm_eps), cos, sin)
            x = x + self.ffn(i, rms_norm(x, self.w(p + "post_attention_layernorm.weight"), c.rms_norm_eps))
        x = rms_norm(x, self.w("model.norm.weight"), c.rms_norm_eps)
        head = self.w("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight")
        return x @ head.T


def load_model(model_dir: str) -> Model:
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = Config.from_dict(json.load(f))
    return Model(model_dir, cfg, TensorStore(model_dir))


def greedy(model: Model, ids: Sequence[int], n: int) -> List[int]:
    """Greedy-decode ``n`` new tokens (full recompute each step; lowest id wins exact ties)."""
    seq = [int(i) for i in ids]
    new: List[int] = []
    for _ in range(n):
        nxt = int(np.argmax(model.forward(seq)[-1]))
        seq.append(nxt)
        new.append(nxt)
    return new


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="float64 NumPy reference forward for HF Llama-style MoE checkpoints")
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="greedy-decode N new tokens")
    ap.add_argument("--json", action="store_true", help="print JSON {tokens, logits, greedy}")
    args = ap.parse_args(argv)
    tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    model = load_model(args.model_dir)
    logits = model.forward(tokens)
    gen = greedy(model, tokens, args.greedy) if args.greedy > 0 else []
    if args.json:
        json.dump({"tokens": tokens, "logits": logits.tolist(), "greedy": gen}, sys.stdout)
        sys.stdout.write("\n")
    else:
        for t, row in enumerate(logits):
            top = np.argsort(-row, kind="stable")[:5]
            print(f"  pos {t:3d}: " + "  ".join(f"{int(i)}:{row[i]:.6f}" for i in top))
        if gen:
            print("greedy:", ",".join(map(str, gen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
