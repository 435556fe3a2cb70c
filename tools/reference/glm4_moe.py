#!/usr/bin/env python3
"""Independent float64 NumPy reference forward pass for Hugging Face ``glm4_moe`` checkpoints
(GLM-4.5, GLM-4.5-Air and later releases of the same layout).

It shares the DeepSeek-V3 router, shared experts, dense-prefix layout, decoder loop and CLI of
``deepseek_v3.py`` and replaces only the attention.  Like it, it is independent of the engine.
Facts from transformers v4.57 (v4.57.0 tag, unchanged up to v4.57.6):
``models/glm4_moe/modeling_glm4_moe.py`` and ``configuration_glm4_moe.py``:

    attention (per layer, h = RMSNorm(x; input_layernorm, rms_norm_eps)):
        q, k, v = q_proj(h), k_proj(h), v_proj(h), each + bias when attention_bias
        head_dim = config.head_dim, else hidden_size / num_attention_heads
        use_qk_norm: q, k = per-head RMSNorm over head_dim (q_norm / k_norm, eps rms_norm_eps), BEFORE RoPE
        partial RoPE: rotary_dim = int(head_dim * partial_rotary_factor) (default 0.5); the FIRST
               rotary_dim dims of each head are rotated in the rotate_half layout (pairs i, i + rotary_dim/2),
               the rest pass through; inv_freq over rotary_dim (yarn included), cos/sin * attention_factor
        GQA: query head j uses kv head j // (heads / kv_heads); scale head_dim^-0.5 (no mscale term)
        causal softmax; o_proj WITHOUT bias (bias=False regardless of attention_bias)
    MLP / MoE exactly as deepseek_v3 (mlp.gate + e_score_correction_bias, grouped sigmoid top-k,
        masked_fill 0.0, norm_topk_prob with + 1e-20, routed_scaling_factor, shared_experts;
        layers < first_k_dense_replace are dense mlp.*); final norm, lm_head (tied if configured).

Layers >= num_hidden_layers (the MTP module; HF ignores model.layers.92.* / 46.*) are not read.
Defaults for absent keys are v4.57's Glm4MoeConfig defaults.  Choices as in deepseek_v3.py
(float64, lowest-index ties, a missing e_score_correction_bias is an error).

Usage (CLI):
    /usr/bin/python3 tools/reference/glm4_moe.py MODEL_DIR --tokens 1,2,3 [--greedy N] [--json] [--routing]
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepseek_v3 as _ds  # noqa: E402  (router, MoE, decoder loop, CLI)
from deepseek_v3 import ForwardOutput, TensorStore, greedy, rope_parameters, route_grouped  # noqa: E402,F401
from qwen3_moe import apply_rope, rms_norm, rope_cos_sin, softmax  # noqa: E402

__all__ = ["Config", "Model", "ForwardOutput", "load_model", "greedy", "route_grouped", "rope_parameters",
           "apply_partial_rope"]

_DEFAULTS = dict(
    vocab_size=151552, hidden_size=4096, intermediate_size=10944, num_hidden_layers=46, num_attention_heads=96,
    partial_rotary_factor=0.5, num_key_value_heads=8, hidden_act="silu", max_position_embeddings=131072,
    rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None, attention_bias=False,
    moe_intermediate_size=1408, num_experts_per_tok=8, n_shared_experts=1, n_routed_experts=128,
    routed_scaling_factor=1.0, n_group=1, topk_group=1, first_k_dense_replace=1, norm_topk_prob=True,
    use_qk_norm=False, head_dim=None,
)


def apply_partial_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """rotate_half RoPE on the first cos.shape[-1] dims of x [T, heads, head_dim]; the rest unchanged."""
    rd = cos.shape[-1]
    return np.concatenate([apply_rope(x[..., :rd], cos, sin), x[..., rd:]], axis=-1)


@dataclasses.dataclass
class Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    partial_rotary_factor: float
    hidden_act: str
    max_position_embeddings: int
    rms_norm_eps: float
    tie_word_embeddings: bool
    rope_theta: float
    rope_scaling: Optional[dict]
    attention_bias: bool
    moe_intermediate_size: int
    num_experts_per_tok: int
    n_shared_experts: int
    n_routed_experts: int
    routed_scaling_factor: float
    n_group: int
    topk_group: int
    first_k_dense_replace: int
    norm_topk_prob: bool
    use_qk_norm: bool

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    def is_moe_layer(self, layer: int) -> bool:
        return layer >= self.first_k_dense_replace

    @staticmethod
    def from_dict(d: dict) -> "Config":
        mt = d.get("model_type", "glm4_moe")
        if mt != "glm4_moe":
            raise ValueError(f"model_type {mt!r} is not glm4_moe")
        v = dict(_DEFAULTS)
        v.update({k: d[k] for k in _DEFAULTS if k in d})
        v["rope_theta"], v["rope_scaling"] = _ds._rope_from_dict(d)
        params = d.get("rope_parameters")
        if "partial_rotary_factor" not in d and isinstance(params, dict) and "partial_rotary_factor" in params:
            v["partial_rotary_factor"] = params["partial_rotary_factor"]
        if v["num_key_value_heads"] is None:
            v["num_key_value_heads"] = v["num_attention_heads"]
        if v["hidden_act"] != "silu":
            raise NotImplementedError(f"hidden_act {v['hidden_act']!r}")
        v["head_dim"] = v["head_dim"] or int(v["hidden_size"]) // int(v["num_attention_heads"])
        for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "max_position_embeddings", "moe_intermediate_size",
                  "num_experts_per_tok", "n_shared_experts", "n_routed_experts", "n_group", "topk_group",
                  "first_k_dense_replace"):
            v[k] = int(v[k] or 0)
        for k in ("partial_rotary_factor", "rms_norm_eps", "routed_scaling_factor"):
            v[k] = float(v[k])
        for k in ("tie_word_embeddings", "attention_bias", "norm_topk_prob", "use_qk_norm"):
            v[k] = bool(v[k])
        c = Config(**v)
        if c.num_attention_heads % c.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if c.rotary_dim % 2 or not 0 < c.rotary_dim <= c.head_dim:
            raise ValueError(f"rotary dim {c.rotary_dim} must be even and in (0, head_dim]")
        if c.first_k_dense_replace < c.num_hidden_layers:
            E = c.n_routed_experts
            if E <= 0 or c.n_group <= 0 or E % c.n_group or E // c.n_group < 2:
                raise ValueError(f"n_routed_experts {E} must split into n_group {c.n_group} groups of >= 2")
            if not (1 <= c.topk_group <= c.n_group and 1 <= c.num_experts_per_tok <= E):
                raise ValueError("topk_group / num_experts_per_tok out of range")
        rope_parameters(2, 10000.0, c.rope_scaling, c.max_position_embeddings)  # type check only
        return c


class Model(_ds.Model):
    """deepseek_v3.Model with GLM-4.5's GQA attention (router, experts and decoder loop inherited)."""

    ATTENTION_MODES = ("naive",)

    def attention_tensors(self, a: str) -> Dict[str, List[int]]:
        c = self.config
        H, nh, nkv, hd = c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        out = {a + "q_proj.weight": [nh * hd, H], a + "k_proj.weight": [nkv * hd, H],
               a + "v_proj.weight": [nkv * hd, H], a + "o_proj.weight": [H, nh * hd]}
        if c.attention_bias:
            out.update({a + "q_proj.bias": [nh * hd], a + "k_proj.bias": [nkv * hd], a + "v_proj.bias": [nkv * hd]})
        if c.use_qk_norm:
            out.update({a + "q_norm.weight": [hd], a + "k_norm.weight": [hd]})
        return out

    def rope_tables(self, T: int):
        c = self.config
        inv, factor = rope_parameters(c.rotary_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings)
        return rope_cos_sin(np.arange(T), inv, factor)

    def attention(self, layer: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                  mode: Optional[str] = None) -> np.ndarray:
        c = self.config
        T = h.shape[0]
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        a = f"model.layers.{layer}.self_attn."
        q = self._lin(h, a + "q_proj", c.attention_bias).reshape(T, nh, hd)
        k = self._lin(h, a + "k_proj", c.attention_bias).reshape(T, nkv, hd)
        v = self._lin(h, a + "v_proj", c.attention_bias).reshape(T, nkv, hd)
        if c.use_qk_norm:
            q = rms_norm(q, self.w(a + "q_norm.weight"), c.rms_norm_eps)
            k = rms_norm(k, self.w(a + "k_norm.weight"), c.rms_norm_eps)
        q, k = apply_partial_rope(q, cos, sin), apply_partial_rope(k, cos, sin)
        group = nh // nkv
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * hd ** -0.5
        scores = np.where(np.tril(np.ones((T, T), dtype=bool))[None], scores, -np.inf)
        out = np.einsum("hqk,khd->qhd", softmax(scores, axis=-1), v)
        return self._lin(out.reshape(T, nh * hd), a + "o_proj")  # o_proj never has a bias


def load_model(model_dir: str, attention: str = "naive") -> Model:
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = Config.from_dict(json.load(f))
    return Model(model_dir, cfg, TensorStore(model_dir), attention=attention)


def main(argv=None) -> int:
    return _ds.run_cli(argv, load_model, "float64 NumPy reference forward for HF glm4_moe checkpoints")


if __name__ == "__main__":
    sys.exit(main())
