#!/usr/bin/env python3
"""Independent float64 NumPy reference forward pass for Hugging Face ``qwen3_next`` checkpoints
(Qwen3-Next-80B-A3B-Instruct / -Thinking and the same layout at other sizes).

Like ``llama_moe.py`` it reuses only the safetensors reader and small math helpers of
``qwen3_moe.py``; nothing under ``src/`` is imported or parsed.  Facts from transformers'
``models/qwen3_next/modeling_qwen3_next.py`` and ``configuration_qwen3_next.py`` (v4.57 and the
later v5 tree, which differ only in config plumbing: ``rope_parameters`` and fused 3-D expert
tensors in memory; checkpoints keep per-expert names):

    RMSNorm (input_layernorm, post_attention_layernorm, model.norm, self_attn.q_norm / k_norm) is
        ZERO-CENTRED: x * rsqrt(mean(x^2) + eps) * (1 + w)
    x = embed_tokens[ids]; per layer L (layer_types[L], default: every full_attention_interval-th
        layer (i + 1) % interval == 0 is "full_attention", the others "linear_attention"):
        x += mixer(RMSNorm(x; input_layernorm)); x += ffn(RMSNorm(x; post_attention_layernorm))
    logits = RMSNorm(x; model.norm) @ lm_head^T (embed_tokens when tie_word_embeddings); mtp.* unused

    full attention (self_attn.*): q_proj -> per head [2 * hd] = (query hd | gate hd);
        q = q_norm(query), k = k_norm(k_proj h) per head; partial rotate_half RoPE on the first
        rd = int(hd * partial_rotary_factor) dims, inv_freq = theta^(-arange(0, rd, 2) / rd);
        GQA causal softmax(q k^T * hd^-0.5) v; out = o_proj(concat(out) * sigmoid(concat(gate)));
        q/k/v/o biases only when attention_bias
    linear attention (linear_attn.*, Gated DeltaNet), nk / nv key / value heads, r = nv / nk:
        in_proj_qkvz(h) viewed [nk, 2 dk + 2 r dv] -> q [dk], k [dk], v [r dv], z [r dv] per key head;
        in_proj_ba(h) viewed [nk, 2 r] -> b [r], a [r]; v, z -> [nv, dv], b, a -> [nv] (group-major)
        mixed = (q flat | k flat | v flat); depthwise causal conv1d (conv1d.weight [C, 1, K], no bias,
            zero history): y[t, c] = sum_i w[c, 0, i] mixed[t - K + 1 + i, c]; silu; split back
        beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias)
        q, k repeated per value head (v head j uses key head j // r); l2norm over dk:
            x * rsqrt(sum(x^2) + 1e-6); q *= dk^-0.5
        per v head, S [dk, dv] = 0; per token: S *= exp(g_t); S += k_t outer ((v_t - S^T k_t) beta_t);
            o_t = S^T q_t  (torch_recurrent_gated_delta_rule); the prefill path is the equivalent
            chunked form torch_chunk_gated_delta_rule, implemented here as well (``delta_rule``)
        o = o * rsqrt(mean(o^2) + eps) * norm.weight * silu(z)   (RMSNormGated: weight NOT 1 + w)
        out_proj(o flat [nv dv])
    FFN: layer L is MoE iff L not in mlp_only_layers and num_experts > 0 and (L + 1) % decoder_sparse_step == 0:
        softmax(mlp.gate h) over all experts, top-k (num_experts_per_tok), renormalised if norm_topk_prob,
        sum of SwiGLU experts mlp.experts.{e}.{gate,up,down}_proj + sigmoid(mlp.shared_expert_gate h) *
        SwiGLU mlp.shared_expert.*; otherwise dense SwiGLU mlp.{gate,up,down}_proj (intermediate_size)

Absent keys take Qwen3NextConfig's defaults.  Choices: float64 throughout, top-k ties to the lowest
expert index, greedy ties to the lowest id, no padding / attention mask (one unpadded sequence).

Usage (CLI):
    /usr/bin/python3 tools/reference/qwen3_next.py MODEL_DIR --tokens 1,2,3 [--greedy N] [--json]
        [--routing] [--delta-rule chunked|recurrent] [--chunk-size 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Dict, List, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_moe import (ForwardOutput, TensorStore, apply_rope, rms_norm, rope_cos_sin,  # noqa: E402
                       rope_inv_freq, route_topk, silu, softmax)

__all__ = ["Config", "Model", "ForwardOutput", "load_model", "greedy", "causal_conv1d", "l2norm",
           "delta_rule_recurrent", "delta_rule_chunked", "DELTA_RULES"]

_DEFAULTS = dict(
    vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=48, num_attention_heads=16,
    num_key_value_heads=2, hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6,
    tie_word_embeddings=False, rope_theta=10000.0, partial_rotary_factor=0.25, attention_bias=False, head_dim=256,
    linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
    linear_num_value_heads=32, decoder_sparse_step=1, moe_intermediate_size=512, shared_expert_intermediate_size=512,
    num_experts_per_tok=10, num_experts=512, norm_topk_prob=True,
)
_INTS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "num_key_value_heads", "max_position_embeddings", "head_dim", "linear_conv_kernel_dim",
         "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads",
         "decoder_sparse_step", "moe_intermediate_size", "shared_expert_intermediate_size", "num_experts_per_tok",
         "num_experts")


@dataclasses.dataclass
class Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    hidden_act: str
    max_position_embeddings: int
    rms_norm_eps: float
    tie_word_embeddings: bool
    rope_theta: float
    partial_rotary_factor: float
    attention_bias: bool
    head_dim: int
    linear_conv_kernel_dim: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    decoder_sparse_step: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    num_experts_per_tok: int
    num_experts: int
    norm_topk_prob: bool
    mlp_only_layers: tuple = ()
    layer_types: tuple = ()

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    def is_moe_layer(self, layer: int) -> bool:
        return (layer not in self.mlp_only_layers and self.num_experts > 0
                and (layer + 1) % self.decoder_sparse_step == 0)

    @staticmethod
    def from_dict(d: dict) -> "Config":
        mt = d.get("model_type", "qwen3_next")
        if mt != "qwen3_next":
            raise ValueError(f"model_type {mt!r} is not qwen3_next")
        v = dict(_DEFAULTS)
        v.update({k: d[k] for k in _DEFAULTS if k in d and d[k] is not None})
        rp = d.get("rope_parameters")  # the v5 spelling: {"rope_type", "rope_theta", "partial_rotary_factor"}
        scaling = d.get("rope_scaling")
        if isinstance(rp, dict):
            scaling = scaling or rp
            for k in ("rope_theta", "partial_rotary_factor"):
                if k not in d and k in rp:
                    v[k] = rp[k]
        if scaling and scaling.get("rope_type", scaling.get("type", "default")) != "default":
            raise NotImplementedError(f"rope scaling {scaling!r} is not implemented in the reference")
        if v["hidden_act"] != "silu":
            raise NotImplementedError(f"hidden_act {v['hidden_act']!r}")
        if d.get("head_dim", 0) is None:
            v["head_dim"] = int(v["hidden_size"]) // int(v["num_attention_heads"])
        for k in _INTS:
            v[k] = int(v[k])
        v["rms_norm_eps"], v["rope_theta"] = float(v["rms_norm_eps"]), float(v["rope_theta"])
        v["partial_rotary_factor"] = float(v["partial_rotary_factor"])
        for k in ("tie_word_embeddings", "attention_bias", "norm_topk_prob"):
            v[k] = bool(v[k])
        n = v["num_hidden_layers"]
        types = d.get("layer_types")
        if types is None:
            interval = int(d.get("full_attention_interval", 4))
            types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
        types = tuple(types)
        if len(types) != n or any(t not in ("linear_attention", "full_attention") for t in types):
            raise ValueError(f"layer_types must be {n} entries of linear_attention / full_attention: {types}")
        c = Config(**v, mlp_only_layers=tuple(int(i) for i in (d.get("mlp_only_layers") or [])), layer_types=types)
        if c.num_attention_heads % c.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if c.linear_num_value_heads % c.linear_num_key_heads:
            raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
        if c.rotary_dim % 2 or not 0 < c.rotary_dim <= c.head_dim:
            raise ValueError(f"rotary dim {c.rotary_dim} must be even and in (0, head_dim]")
        if any(c.is_moe_layer(i) for i in range(n)) and not 1 <= c.num_experts_per_tok <= c.num_experts:
            raise ValueError("num_experts_per_tok out of range")
        return c


# --------------------------------------------------------------------------------------------
# Gated DeltaNet building blocks (module level so that the tests can call them directly)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def l2norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def causal_conv1d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Depthwise causal conv: x [T, C], w [C, K] -> y[t, c] = sum_i w[c, i] x[t - K + 1 + i, c]."""
    T, K = x.shape[0], w.shape[1]
    xp = np.concatenate([np.zeros((K - 1, x.shape[1])), x], axis=0)
    return sum(w[:, i] * xp[i:i + T] for i in range(K))


def delta_rule_recurrent(q, k, v, g, beta):
    """q, k [h, T, dk] (normalised and scaled), v [h, T, dv], g, beta [h, T] -> o [h, T, dv]."""
    h, T, dk = k.shape
    S = np.zeros((h, dk, v.shape[-1]))
    out = np.zeros(v.shape)
    for t in range(T):
        S = S * np.exp(g[:, t])[:, None, None]
        delta = (v[:, t] - np.einsum("hkv,hk->hv", S, k[:, t])) * beta[:, t, None]
        S = S + k[:, t, :, None] * delta[:, None, :]
        out[:, t] = np.einsum("hkv,hk->hv", S, q[:, t])
    return out


def delta_rule_chunked(q, k, v, g, beta, chunk_size: int = 64):
    """The chunked form of the same recurrence (torch_chunk_gated_delta_rule), same shapes."""
    h, T, dk = k.shape
    C = int(chunk_size)
    if C < 1:
        raise ValueError("chunk_size must be >= 1")
    pad = (-T) % C

    def chunks(x):  # zero-pad the time axis to a multiple of C, then split it into [n, C]
        x = np.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
        return x.reshape((h, -1, C) + x.shape[2:])

    q, k, v, g, beta = (chunks(x) for x in (q, k, v, g, beta))
    k_beta, v_beta = k * beta[..., None], v * beta[..., None]
    g = np.cumsum(g, axis=-1)                                   # within each chunk
    lower = np.tril(np.ones((C, C), dtype=bool))                # j <= i
    strict = np.tril(np.ones((C, C), dtype=bool), -1)           # j < i
    decay = np.where(lower, np.exp(np.where(lower, g[..., :, None] - g[..., None, :], 0.0)), 0.0)
    A = -np.where(strict, (k_beta @ np.swapaxes(k, -1, -2)) * decay, 0.0)
    for i in range(1, C):                                       # forward substitution: (I + A)^-1
        A[..., i, :i] = A[..., i, :i] + np.sum(A[..., i, :i, None] * A[..., :i, :i], axis=-2)
    A = A + np.eye(C)
    u = A @ v_beta
    w = A @ (k_beta * np.exp(g)[..., None])                     # k_cumdecay
    S = np.zeros((h, dk, v.shape[-1]))
    out = np.zeros(u.shape)
    for n in range(u.shape[1]):
        qn, kn, gn = q[:, n], k[:, n], g[:, n]
        attn = np.where(lower, (qn @ np.swapaxes(kn, -1, -2)) * decay[:, n], 0.0)
        v_new = u[:, n] - w[:, n] @ S
        out[:, n] = (qn * np.exp(gn)[..., None]) @ S + attn @ v_new
        S = S * np.exp(gn[:, -1])[:, None, None] + \
            np.swapaxes(kn * np.exp(gn[:, -1:] - gn)[..., None], -1, -2) @ v_new
    return out.reshape(h, -1, out.shape[-1])[:, :T]


DELTA_RULES = {"chunked": delta_rule_chunked, "recurrent": delta_rule_recurrent}


# --------------------------------------------------------------------------------------------
# model


class Model:
    def __init__(self, model_dir: str, config: Config, store: TensorStore):
        self.model_dir = model_dir
        self.config = config
        self.store = store
        self._cache: Dict[str, np.ndarray] = {}
        for name, shape in self.expected_tensors().items():
            if name not in store:
                raise KeyError(f"{model_dir}: missing tensor {name}")
            if list(store.shape(name)) != list(shape):
                raise ValueError(f"{model_dir}: tensor {name} has shape {store.shape(name)}, expected {list(shape)}")

    def w(self, name: str) -> np.ndarray:
        t = self._cache.get(name)
        if t is None:
            t = self._cache[name] = self.store.get(name)
        return t

    def expected_tensors(self) -> Dict[str, List[int]]:
        c = self.config
        H, nh, nkv, hd = c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        kd, vd = c.linear_num_key_heads * c.linear_key_head_dim, c.linear_num_value_heads * c.linear_value_head_dim
        nv = c.linear_num_value_heads
        s = {"model.embed_tokens.weight": [c.vocab_size, H], "model.norm.weight": [H]}
        if not c.tie_word_embeddings:
            s["lm_head.weight"] = [c.vocab_size, H]

        def mlp(p, width):
            s.update({p + "gate_proj.weight": [width, H], p + "up_proj.weight": [width, H],
                      p + "down_proj.weight": [H, width]})

        for L in range(c.num_hidden_layers):
            p = f"model.layers.{L}."
            s[p + "input_layernorm.weight"] = s[p + "post_attention_layernorm.weight"] = [H]
            if c.layer_types[L] == "full_attention":
                a = p + "self_attn."
                s.update({a + "q_proj.weight": [2 * nh * hd, H], a + "k_proj.weight": [nkv * hd, H],
                          a + "v_proj.weight": [nkv * hd, H], a + "o_proj.weight": [H, nh * hd],
                          a + "q_norm.weight": [hd], a + "k_norm.weight": [hd]})
                if c.attention_bias:
                    s.update({a + "q_proj.bias": [2 * nh * hd], a + "k_proj.bias": [nkv * hd],
                              a + "v_proj.bias": [nkv * hd], a + "o_proj.bias": [H]})
            else:
                a = p + "linear_attn."
                s.update({a + "in_proj_qkvz.weight": [2 * kd + 2 * vd, H], a + "in_proj_ba.weight": [2 * nv, H],
                          a + "conv1d.weight": [2 * kd + vd, 1, c.linear_conv_kernel_dim], a + "dt_bias": [nv],
                          a + "A_log": [nv], a + "norm.weight": [c.linear_value_head_dim],
                          a + "out_proj.weight": [H, vd]})
            if c.is_moe_layer(L):
                s[p + "mlp.gate.weight"] = [c.num_experts, H]
                s[p + "mlp.shared_expert_gate.weight"] = [1, H]
                for e in range(c.num_experts):
                    mlp(p + f"mlp.experts.{e}.", c.moe_intermediate_size)
                mlp(p + "mlp.shared_expert.", c.shared_expert_intermediate_size)
            else:
                mlp(p + "mlp.", c.intermediate_size)
        return s

    def _lin(self, x, name, bias=False):
        y = x @ self.w(name + ".weight").T
        return y + self.w(name + ".bias") if bias else y

    def _norm(self, x, name):  # Qwen3NextRMSNorm: zero-centred weight
        return rms_norm(x, 1.0 + self.w(name), self.config.rms_norm_eps)

    def _swiglu(self, h, p):
        return self._lin(silu(self._lin(h, p + "gate_proj")) * self._lin(h, p + "up_proj"), p + "down_proj")

    def full_attention(self, layer: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        c = self.config
        T, nh, nkv, hd, rd = h.shape[0], c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rotary_dim
        a, b = f"model.layers.{layer}.self_attn.", c.attention_bias
        qg = self._lin(h, a + "q_proj", b).reshape(T, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
        q = self._norm(q, a + "q_norm.weight")
        k = self._norm(self._lin(h, a + "k_proj", b).reshape(T, nkv, hd), a + "k_norm.weight")
        v = self._lin(h, a + "v_proj", b).reshape(T, nkv, hd)
        q = np.concatenate([apply_rope(q[..., :rd], cos, sin), q[..., rd:]], axis=-1)
        k = np.concatenate([apply_rope(k[..., :rd], cos, sin), k[..., rd:]], axis=-1)
        k, v = np.repeat(k, nh // nkv, axis=1), np.repeat(v, nh // nkv, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * hd ** -0.5
        scores = np.where(np.tril(np.ones((T, T), dtype=bool))[None], scores, -np.inf)
        out = np.einsum("hqk,khd->qhd", softmax(scores, axis=-1), v).reshape(T, nh * hd)
        return self._lin(out * sigmoid(gate), a + "o_proj", b)

    def linear_attention(self, layer: int, h: np.ndarray, delta_rule: str = "chunked",
                         chunk_size: int = 64) -> np.ndarray:
        c = self.config
        T, nk, nv = h.shape[0], c.linear_num_key_heads, c.linear_num_value_heads
        dk, dv, r = c.linear_key_head_dim, c.linear_value_head_dim, nv // nk
        a = f"model.layers.{layer}.linear_attn."
        qkvz = self._lin(h, a + "in_proj_qkvz").reshape(T, nk, 2 * dk + 2 * r * dv)
        ba = self._lin(h, a + "in_proj_ba").reshape(T, nk, 2 * r)
        q, k = qkvz[..., :dk], qkvz[..., dk:2 * dk]
        v, z = qkvz[..., 2 * dk:2 * dk + r * dv], qkvz[..., 2 * dk + r * dv:].reshape(T, nv, dv)
        b, a_ = ba[..., :r].reshape(T, nv), ba[..., r:].reshape(T, nv)
        mixed = np.concatenate([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], axis=-1)
        mixed = silu(causal_conv1d(mixed, self.w(a + "conv1d.weight")[:, 0, :]))
        q = mixed[:, :nk * dk].reshape(T, nk, dk)
        k = mixed[:, nk * dk:2 * nk * dk].reshape(T, nk, dk)
        v = mixed[:, 2 * nk * dk:].reshape(T, nv, dv)
        beta = sigmoid(b)
        g = -np.exp(self.w(a + "A_log")) * softplus(a_ + self.w(a + "dt_bias"))
        q, k = np.repeat(q, r, axis=1), np.repeat(k, r, axis=1)     # v head j <- key head j // r
        q, k = l2norm(q) * dk ** -0.5, l2norm(k)
        o = DELTA_RULES[delta_rule](*(np.swapaxes(x, 0, 1) for x in (q, k, v, g, beta)), **(
            {"chunk_size": chunk_size} if delta_rule == "chunked" else {}))
        o = np.swapaxes(o, 0, 1)                                    # [T, nv, dv]
        o = rms_norm(o, self.w(a + "norm.weight"), c.rms_norm_eps) * silu(z)
        return self._lin(o.reshape(T, nv * dv), a + "out_proj")

    def moe(self, layer: int, h: np.ndarray):
        c = self.config
        p = f"model.layers.{layer}.mlp."
        router_logits = self._lin(h, p + "gate")
        experts, weights = route_topk(router_logits, c.num_experts_per_tok, c.norm_topk_prob)
        out = np.zeros_like(h)
        for e in np.unique(experts):
            rows, slot = np.nonzero(experts == e)
            out[rows] += self._swiglu(h[rows], p + f"experts.{int(e)}.") * weights[rows, slot][:, None]
        out += sigmoid(self._lin(h, p + "shared_expert_gate")) * self._swiglu(h, p + "shared_expert.")
        return out, {"experts": experts, "weights": weights, "router_logits": router_logits}

    def forward(self, ids: Sequence[int], delta_rule: str = "chunked", chunk_size: int = 64,
                return_routing: bool = False, return_hidden_states: bool = False):
        """Logits [T, vocab] (float64); a ForwardOutput with ``return_routing`` / ``return_hidden_states``."""
        c = self.config
        if delta_rule not in DELTA_RULES:
            raise ValueError(f"delta_rule must be one of {sorted(DELTA_RULES)}")
        ids = np.asarray(list(ids), dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token id out of range [0, {c.vocab_size})")
        inv_freq, _ = rope_inv_freq(c.rotary_dim, c.rope_theta)
        cos, sin = rope_cos_sin(np.arange(ids.size), inv_freq)
        x = self.w("model.embed_tokens.weight")[ids]
        hidden, routing = [x.copy()], []
        for L in range(c.num_hidden_layers):
            p = f"model.layers.{L}."
            h = self._norm(x, p + "input_layernorm.weight")
            if c.layer_types[L] == "full_attention":
                x = x + self.full_attention(L, h, cos, sin)
            else:
                x = x + self.linear_attention(L, h, delta_rule, chunk_size)
            h = self._norm(x, p + "post_attention_layernorm.weight")
            y, info = self.moe(L, h) if c.is_moe_layer(L) else (self._swiglu(h, p + "mlp."), None)
            x = x + y
            hidden.append(x.copy())
            routing.append(info)
        head = self.w("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight")
        logits = self._norm(x, "model.norm.weight") @ head.T
        if return_routing or return_hidden_states:
            return ForwardOutput(logits=logits, hidden_states=hidden if return_hidden_states else None,
                                 routing=routing if return_routing else None)
        return logits


def load_model(model_dir: str) -> Model:
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = Config.from_dict(json.load(f))
    return Model(model_dir, cfg, TensorStore(model_dir))


def greedy(model: Model, ids: Sequence[int], n: int, **forward_kwargs) -> List[int]:
    """Greedy-decode ``n`` new tokens (full recompute each step; lowest id wins exact ties)."""
    seq = [int(i) for i in ids]
    new: List[int] = []
    for _ in range(n):
        nxt = int(np.argmax(model.forward(seq, **forward_kwargs)[-1]))
        seq.append(nxt)
        new.append(nxt)
    return new


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="float64 NumPy reference forward for HF qwen3_next checkpoints")
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="greedy-decode N new tokens")
    ap.add_argument("--json", action="store_true", help="print JSON {tokens, logits, greedy[, routing]}")
    ap.add_argument("--routing", action="store_true",
                    help='with --json: add "routing": per layer null (dense) or per-token experts and weights')
    ap.add_argument("--delta-rule", choices=sorted(DELTA_RULES), default="chunked")
    ap.add_argument("--chunk-size", type=int, default=64)
    args = ap.parse_args(argv)
    try:
        tokens = [int(t) for t in args.tokens.replace(" ", "").split(",") if t]
    except ValueError:
        ap.error("--tokens must be comma-separated integers")
    if not tokens:
        ap.error("--tokens is empty")
    model = load_model(args.model_dir)
    kw = {"delta_rule": args.delta_rule, "chunk_size": args.chunk_size}
    out = model.forward(tokens, return_routing=True, **kw)
    gen = greedy(model, tokens, args.greedy, **kw) if args.greedy > 0 else []
    if args.json:
        doc = {"tokens": tokens, "logits": out.logits.tolist(), "greedy": gen}
        if args.routing:
            doc["routing"] = [r if r is None else {"experts": r["experts"].tolist(), "weights": r["weights"].tolist()}
                              for r in out.routing]
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0
    for t, row in enumerate(out.logits):
        top = np.argsort(-row, kind="stable")[:5]
        print(f"  pos {t:3d}: " + "  ".join(f"{int(i)}:{row[i]:.6f}" for i in top))
    if gen:
        print("greedy:", ",".join(map(str, gen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
