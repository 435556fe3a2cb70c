#!/usr/bin/env python3
"""Independent float64 NumPy reference forward pass for Hugging Face Gemma 4 MoE checkpoints
(``gemma4``: the multimodal release, e.g. google/gemma-4-26B-A4B(-it), whose text weights sit
under ``model.language_model.``; ``gemma4_text``: a text-only checkpoint under ``model.``).

Written from transformers' ``models/gemma4/modeling_gemma4.py``, ``configuration_gemma4.py`` and
``modeling_rope_utils.py`` (the Gemma 4 release, transformers >= 5.5); it shares no code with the
engine.  Only the text decoder is computed (the vision / audio towers are not read).

    embeddings:  x = embed_tokens[ids] * sqrt(hidden_size), the scale cast to the weights' dtype
                 first (Gemma4TextScaledWordEmbedding: embed_scale.to(weight.dtype); a bfloat16
                 release multiplies by bf16(sqrt(2816)) = 53.0).  The dtype is the config's
                 ``dtype`` / ``torch_dtype`` (text_config first, then the top level).
    RMSNorm:     x * (mean(x^2) + eps)^-0.5 * weight  (Gemma4RMSNorm stores the scale itself, no
                 1 + w); ``with_scale=False`` (v_norm, the router's norm) has no weight.
    layer types: config.layer_types, default five sliding_attention then one full_attention; the
                 last layer is forced to full_attention.
    attention (per layer, h = input_layernorm(x)):
        sliding layers: head_dim, num_key_value_heads, causal window: key j visible to query i iff
                        0 <= i - j < sliding_window;
        full layers:    global_head_dim (default 512); with attention_k_eq_v, num_global_key_value_heads
                        kv heads (when given) and no v_proj: v is the raw k projection;
        q = q_norm(q_proj(h)) per head, then RoPE; k = k_norm(k_proj(h)) per head, then RoPE;
        v = v_norm(v) per head (RMSNorm without weight); projections (o_proj too) + bias when
        attention_bias; GQA query head j uses kv head j // (heads / kv_heads); softmax scale 1.0.
    RoPE (rotate_half layout, cos/sin = cat(freqs, freqs)):
        sliding layers: rope_parameters.sliding_attention, "default": inv_freq[i] = theta^(-2i/head_dim);
        full layers: rope_parameters.full_attention, "proportional": the first
                     rope_angles = int(partial_rotary_factor * global_head_dim // 2) pairs get
                     theta^(-2i/global_head_dim) (exponent over the WHOLE head), the other pairs
                     frequency 0 (they pass through); "factor" divides all (only 1 is accepted here).
        defaults: sliding theta 1e4; full proportional, partial 0.25, theta 1e6.
    feed-forward (residual r = x after attention):
        h1 = post_feedforward_layernorm_1(mlp(pre_feedforward_layernorm(r)))
             mlp(y) = down(gelu_tanh(gate(y)) * up(y))
        router on r: z = norm_noscale(r) * router.scale * hidden_size^-0.5; logits = router.proj(z);
             p = softmax(logits); top_k_experts by p (ties: lowest index); w = p / sum(p_topk);
             w *= router.per_expert_scale[expert]
        h2 = post_feedforward_layernorm_2(sum_e w_e * expert_e(pre_feedforward_layernorm_2(r)))
             experts.gate_up_proj [E, 2I, H] (gate rows first), experts.down_proj [E, H, I]
        x = (r + post_feedforward_layernorm(h1 + h2)) * layer_scalar
        the attention output: x = x_in + post_attention_layernorm(o_proj(...))
    head:        logits = norm(x) @ embed_tokens^T (tied, the default) or lm_head; then, with
                 final_logit_softcapping c: logits = c * tanh(logits / c).

Refused (the reference computes only the MoE text release's math): per-layer embeddings
(hidden_size_per_layer_input, default 256; 0 or null turns them off), num_kv_shared_layers,
use_bidirectional_attention, use_double_wide_mlp, enable_moe_block false, an activation other
than gelu_pytorch_tanh, RoPE frequency scaling.

Usage (CLI):
    /usr/bin/python3 tools/reference/gemma4.py MODEL_DIR --tokens 1,2,3 [--greedy N] [--json] [--routing]
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_moe import ForwardOutput, TensorStore, softmax  # noqa: E402  (safetensors reader, softmax)
import deepseek_v3 as _ds  # noqa: E402  (the shared CLI)

__all__ = ["Config", "Model", "ForwardOutput", "load_model", "greedy", "embedding_scale", "layer_inv_freq",
           "gelu_tanh"]

SLIDING, FULL = "sliding_attention", "full_attention"

# Gemma4TextConfig's defaults for the fields read here.
_DEFAULTS = dict(
    vocab_size=262144, hidden_size=2304, intermediate_size=9216, num_hidden_layers=30, num_attention_heads=8,
    num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072,
    rms_norm_eps=1e-6, tie_word_embeddings=True, rope_parameters=None, attention_bias=False, sliding_window=512,
    layer_types=None, final_logit_softcapping=None, use_bidirectional_attention=None,
    hidden_size_per_layer_input=256, attention_k_eq_v=False, num_kv_shared_layers=0, enable_moe_block=False,
    use_double_wide_mlp=False, num_experts=None, top_k_experts=None, moe_intermediate_size=None,
    global_head_dim=512, num_global_key_value_heads=None,
)
_DEFAULT_ROPE = {SLIDING: {"rope_type": "default", "rope_theta": 10000.0},
                 FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}


def _dtype_of(d: dict) -> str:
    for key in ("dtype", "torch_dtype"):
        if isinstance(d.get(key), str):
            return d[key]
    return ""


def _round_bf16(x: float) -> float:
    bits = int(np.array([x], dtype="<f4").view("<u4")[0])
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return float(np.array([bits], dtype="<u4").view("<f4")[0])


def embedding_scale(hidden: int, dtype: str) -> float:
    """sqrt(hidden) as a float32 tensor cast to the checkpoint's dtype (transformers' embed_scale)."""
    s = float(np.float32(math.sqrt(hidden)))
    if dtype == "bfloat16":
        return _round_bf16(s)
    if dtype == "float16":
        return float(np.float16(s))
    return s


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_inv_freq(head_dim: int, params: dict) -> np.ndarray:
    """inv_freq [head_dim / 2] of one layer type's rope_parameters (default or proportional)."""
    theta = float(params.get("rope_theta"))
    kind = params.get("rope_type", "default")
    if float(params.get("factor", 1.0)) != 1.0:
        raise NotImplementedError("RoPE frequency scaling (factor != 1)")
    if kind == "default":
        if float(params.get("partial_rotary_factor", 1.0)) != 1.0:
            raise NotImplementedError("a partial default RoPE")
        return 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if kind == "proportional":
        angles = int(float(params.get("partial_rotary_factor", 1.0)) * head_dim // 2)
        inv = np.zeros(head_dim // 2)
        inv[:angles] = 1.0 / theta ** (np.arange(0, 2 * angles, 2, dtype=np.float64) / head_dim)
        return inv
    raise NotImplementedError(f"rope_type {kind!r}")


def _norm(x: np.ndarray, w: Optional[np.ndarray], eps: float) -> np.ndarray:
    y = x * (np.mean(x * x, axis=-1, keepdims=True) + eps) ** -0.5
    return y if w is None else y * w


def _rotate(x: np.ndarray, inv: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """rotate_half RoPE of x [T, heads, D] with inv_freq [D/2]."""
    f = positions[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(np.concatenate([f, f], -1))[:, None, :], np.sin(np.concatenate([f, f], -1))[:, None, :]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rot * sin


@dataclasses.dataclass
class Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    global_head_dim: int
    num_global_key_value_heads: Optional[int]
    attention_k_eq_v: bool
    rms_norm_eps: float
    tie_word_embeddings: bool
    attention_bias: bool
    sliding_window: int
    layer_types: List[str]
    rope_parameters: Dict[str, dict]
    final_logit_softcapping: Optional[float]
    num_experts: int
    top_k_experts: int
    moe_intermediate_size: int
    embed_scale: float
    prefix: str  # "model.language_model." (multimodal release) or "model."

    def is_full(self, layer: int) -> bool:
        return self.layer_types[layer] == FULL

    def layer_head_dim(self, layer: int) -> int:
        return self.global_head_dim if self.is_full(layer) else self.head_dim

    def layer_kv_heads(self, layer: int) -> int:
        if self.is_full(layer) and self.attention_k_eq_v and self.num_global_key_value_heads is not None:
            return self.num_global_key_value_heads
        return self.num_key_value_heads

    def values_are_keys(self, layer: int) -> bool:
        return self.attention_k_eq_v and self.is_full(layer)

    @staticmethod
    def from_dict(d: dict) -> "Config":
        mt = d.get("model_type")
        if mt == "gemma4":
            text = d.get("text_config")
            if not isinstance(text, dict):
                raise ValueError("a gemma4 config.json holds the text model's config in text_config")
            prefix = "model.language_model."
            dtype = _dtype_of(text) or _dtype_of(d)
            tie_default = d.get("tie_word_embeddings", True)
        elif mt == "gemma4_text":
            text, prefix, dtype, tie_default = d, "model.", _dtype_of(d), True
        else:
            raise ValueError(f"model_type {mt!r} is neither gemma4 nor gemma4_text")
        v = dict(_DEFAULTS)
        v["tie_word_embeddings"] = tie_default
        v.update({k: text[k] for k in _DEFAULTS if k in text})
        if v["hidden_size_per_layer_input"]:
            raise NotImplementedError("per-layer embeddings (hidden_size_per_layer_input)")
        for key in ("num_kv_shared_layers", "use_bidirectional_attention", "use_double_wide_mlp"):
            if v[key]:
                raise NotImplementedError(key)
        if not v["enable_moe_block"]:
            raise NotImplementedError("enable_moe_block false (a dense Gemma 4)")
        if v["hidden_activation"] != "gelu_pytorch_tanh":
            raise NotImplementedError(f"hidden_activation {v['hidden_activation']!r}")
        L = int(v["num_hidden_layers"])
        types = list(v["layer_types"]) if v["layer_types"] is not None else \
            [SLIDING if (i + 1) % 6 else FULL for i in range(L)]
        if len(types) != L or any(t not in (SLIDING, FULL) for t in types):
            raise ValueError("layer_types must name sliding_attention / full_attention for every layer")
        types[-1] = FULL
        rope = v["rope_parameters"] or _DEFAULT_ROPE
        for t in (SLIDING, FULL):
            if not isinstance(rope.get(t), dict):
                raise ValueError(f"rope_parameters has no {t}")
        c = Config(
            vocab_size=int(v["vocab_size"]), hidden_size=int(v["hidden_size"]),
            intermediate_size=int(v["intermediate_size"]), num_hidden_layers=L,
            num_attention_heads=int(v["num_attention_heads"]), num_key_value_heads=int(v["num_key_value_heads"]),
            head_dim=int(v["head_dim"]), global_head_dim=int(v["global_head_dim"]),
            num_global_key_value_heads=None if v["num_global_key_value_heads"] is None
            else int(v["num_global_key_value_heads"]),
            attention_k_eq_v=bool(v["attention_k_eq_v"]), rms_norm_eps=float(v["rms_norm_eps"]),
            tie_word_embeddings=bool(v["tie_word_embeddings"]), attention_bias=bool(v["attention_bias"]),
            sliding_window=int(v["sliding_window"]), layer_types=types, rope_parameters=rope,
            final_logit_softcapping=None if v["final_logit_softcapping"] is None
            else float(v["final_logit_softcapping"]),
            num_experts=int(v["num_experts"]), top_k_experts=int(v["top_k_experts"]),
            moe_intermediate_size=int(v["moe_intermediate_size"]),
            embed_scale=embedding_scale(int(v["hidden_size"]), dtype), prefix=prefix)
        for layer in range(L):
            if c.num_attention_heads % c.layer_kv_heads(layer):
                raise ValueError(f"layer {layer}: num_attention_heads must be a multiple of its kv heads")
        if not 1 <= c.top_k_experts <= c.num_experts:
            raise ValueError("top_k_experts out of range")
        return c


class Model:
    def __init__(self, model_dir: str, config: Config, store: TensorStore):
        self.model_dir, self.config, self.store = model_dir, config, store
        self._cache: Dict[str, np.ndarray] = {}
        c = config
        self.inv_freq = {SLIDING: layer_inv_freq(c.head_dim, c.rope_parameters[SLIDING]),
                         FULL: layer_inv_freq(c.global_head_dim, c.rope_parameters[FULL])}
        for name, shape in self.expected_tensors().items():
            full = self._name(name)
            if full not in store:
                raise KeyError(f"{model_dir}: missing tensor {full}")
            if list(store.shape(full)) != list(shape):
                raise ValueError(f"{full}: shape {store.shape(full)}, expected {list(shape)}")

    def _name(self, name: str) -> str:
        return self.config.prefix + name[len("model."):] if name.startswith("model.") else name

    def w(self, name: str) -> np.ndarray:
        t = self._cache.get(name)
        if t is None:
            t = self._cache[name] = self.store.get(self._name(name))
        return t

    def expected_tensors(self) -> Dict[str, List[int]]:
        c = self.config
        H, E, I, F = c.hidden_size, c.num_experts, c.moe_intermediate_size, c.intermediate_size
        out: Dict[str, List[int]] = {"model.embed_tokens.weight": [c.vocab_size, H], "model.norm.weight": [H]}
        if not c.tie_word_embeddings:
            out["lm_head.weight"] = [c.vocab_size, H]
        for layer in range(c.num_hidden_layers):
            p, D, kv = f"model.layers.{layer}.", c.layer_head_dim(layer), c.layer_kv_heads(layer)
            projections = {"q_proj": [c.num_attention_heads * D, H], "k_proj": [kv * D, H],
                           "o_proj": [H, c.num_attention_heads * D]}
            if not c.values_are_keys(layer):
                projections["v_proj"] = [kv * D, H]
            for n, shape in projections.items():
                out[p + f"self_attn.{n}.weight"] = shape
                if c.attention_bias:
                    out[p + f"self_attn.{n}.bias"] = shape[:1]
            out[p + "self_attn.q_norm.weight"] = [D]
            out[p + "self_attn.k_norm.weight"] = [D]
            for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "post_feedforward_layernorm_1", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2",
                      "post_feedforward_layernorm"):
                out[p + n + ".weight"] = [H]
            out.update({p + "mlp.gate_proj.weight": [F, H], p + "mlp.up_proj.weight": [F, H],
                        p + "mlp.down_proj.weight": [H, F], p + "router.proj.weight": [E, H],
                        p + "router.scale": [H], p + "router.per_expert_scale": [E], p + "layer_scalar": [1],
                        p + "experts.gate_up_proj": [E, 2 * I, H], p + "experts.down_proj": [E, H, I]})
        return out

    def _lin(self, x: np.ndarray, name: str) -> np.ndarray:
        y = x @ self.w(name + ".weight").T
        return y + self.w(name + ".bias") if self.config.attention_bias else y

    def attention(self, layer: int, h: np.ndarray) -> np.ndarray:
        c = self.config
        T, nh, D, kv = h.shape[0], c.num_attention_heads, c.layer_head_dim(layer), c.layer_kv_heads(layer)
        a = f"model.layers.{layer}.self_attn."
        pos = np.arange(T)
        q = self._lin(h, a + "q_proj").reshape(T, nh, D)
        k_raw = self._lin(h, a + "k_proj").reshape(T, kv, D)
        v = k_raw if c.values_are_keys(layer) else self._lin(h, a + "v_proj").reshape(T, kv, D)
        inv = self.inv_freq[c.layer_types[layer]]
        q = _rotate(_norm(q, self.w(a + "q_norm.weight"), c.rms_norm_eps), inv, pos)
        k = _rotate(_norm(k_raw, self.w(a + "k_norm.weight"), c.rms_norm_eps), inv, pos)
        v = _norm(v, None, c.rms_norm_eps)
        k, v = np.repeat(k, nh // kv, axis=1), np.repeat(v, nh // kv, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k)  # scaling 1.0: q_norm / k_norm set the scale
        dist = pos[:, None] - pos[None, :]
        visible = dist >= 0
        if not c.is_full(layer):
            visible &= dist < c.sliding_window
        scores = np.where(visible[None], scores, -np.inf)
        out = np.einsum("hqk,khd->qhd", softmax(scores, axis=-1), v).reshape(T, nh * D)
        return self._lin(out, a + "o_proj")

    def route(self, layer: int, r: np.ndarray):
        """(experts [T, k], weights [T, k] as applied, router_logits [T, E]) for the residual r."""
        c = self.config
        p = f"model.layers.{layer}.router."
        z = _norm(r, None, c.rms_norm_eps) * self.w(p + "scale") * c.hidden_size ** -0.5
        logits = z @ self.w(p + "proj.weight").T
        probs = softmax(logits, axis=-1)
        experts = np.argsort(-probs, axis=-1, kind="stable")[:, : c.top_k_experts]
        weights = np.take_along_axis(probs, experts, axis=-1)
        weights = weights / weights.sum(axis=-1, keepdims=True) * self.w(p + "per_expert_scale")[experts]
        return experts.astype(np.int64), weights, logits

    def experts(self, layer: int, y: np.ndarray, experts: np.ndarray, weights: np.ndarray) -> np.ndarray:
        c = self.config
        p, I = f"model.layers.{layer}.experts.", c.moe_intermediate_size
        gate_up, down = self.w(p + "gate_up_proj"), self.w(p + "down_proj")
        out = np.zeros_like(y)
        for t in range(y.shape[0]):
            for e, wt in zip(experts[t], weights[t]):
                gu = gate_up[e] @ y[t]
                out[t] += wt * (down[e] @ (gelu_tanh(gu[:I]) * gu[I:]))
        return out

    def forward(self, ids: Sequence[int], return_hidden_states: bool = False, return_routing: bool = False):
        """Logits [T, vocab] (float64) for positions 0..T-1, or a ForwardOutput when asked for more."""
        c = self.config
        ids = np.asarray(list(ids), dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token id out of range [0, {c.vocab_size})")
        eps = c.rms_norm_eps
        x = self.w("model.embed_tokens.weight")[ids] * c.embed_scale
        hidden = [x.copy()] if return_hidden_states else None
        routing = [] if return_routing else None
        for layer in range(c.num_hidden_layers):
            p = f"model.layers.{layer}."
            n = lambda name, v: _norm(v, self.w(p + name + ".weight"), eps)  # noqa: E731
            x = x + n("post_attention_layernorm", self.attention(layer, n("input_layernorm", x)))
            r = x
            y = n("pre_feedforward_layernorm", r)
            mlp = (gelu_tanh(y @ self.w(p + "mlp.gate_proj.weight").T) * (y @ self.w(p + "mlp.up_proj.weight").T)) \
                @ self.w(p + "mlp.down_proj.weight").T
            h1 = n("post_feedforward_layernorm_1", mlp)
            experts, weights, logits = self.route(layer, r)
            h2 = n("post_feedforward_layernorm_2",
                   self.experts(layer, n("pre_feedforward_layernorm_2", r), experts, weights))
            x = (r + n("post_feedforward_layernorm", h1 + h2)) * self.w(p + "layer_scalar")[0]
            if hidden is not None:
                hidden.append(x.copy())
            if routing is not None:
                routing.append({"experts": experts, "weights": weights, "router_logits": logits})
        x = _norm(x, self.w("model.norm.weight"), eps)
        logits = x @ self.w("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight").T
        if c.final_logit_softcapping is not None:
            logits = c.final_logit_softcapping * np.tanh(logits / c.final_logit_softcapping)
        if return_hidden_states or return_routing:
            return ForwardOutput(logits=logits, hidden_states=hidden, routing=routing)
        return logits


def greedy(model: Model, ids: Sequence[int], n: int) -> List[int]:
    """Greedy-decode ``n`` new tokens (full recompute each step; lowest id wins exact ties)."""
    seq = [int(i) for i in ids]
    for _ in range(n):
        seq.append(int(np.argmax(model.forward(seq)[-1])))
    return seq[len(ids):]


def load_model(model_dir: str) -> Model:
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = Config.from_dict(json.load(f))
    return Model(model_dir, cfg, TensorStore(model_dir))


def main(argv=None) -> int:
    return _ds.run_cli(argv, load_model, "float64 NumPy reference forward for HF Gemma 4 (MoE) checkpoints")


if __name__ == "__main__":
    sys.exit(main())
