#!/usr/bin/env python3
"""Independent float64 NumPy reference forward pass for Hugging Face ``deepseek_v3`` checkpoints
(DeepSeek-V3 / R1 layout: Multi-head Latent Attention + grouped sigmoid routing with shared experts).

Like ``qwen3_moe.py`` (whose safetensors reader and small helpers it imports; none of it touches
the engine: nothing under ``src/`` is imported or parsed) it reads a Hugging Face model directory
(``config.json`` + ``model.safetensors`` or an index and its shards) and computes in float64.
The facts follow transformers v4.57 (checked against the v4.57.0 tag, unchanged up to v4.57.6):
``models/deepseek_v3/modeling_deepseek_v3.py``, ``configuration_deepseek_v3.py`` and
``modeling_rope_utils.py``:

    x = embed_tokens[ids]
    for each layer l < num_hidden_layers:
        h = RMSNorm(x; input_layernorm, rms_norm_eps)
        q = q_proj(h)                                        if q_lora_rank is null (no bias)
          = q_b_proj(RMSNorm(q_a_proj(h) (+bias); q_a_layernorm, eps 1e-6))   otherwise
        q -> [T, heads, nope + rope], split into q_nope | q_pe
        kv = kv_a_proj_with_mqa(h) (+bias) -> c | k_pe      ([T, kv_lora_rank] | [T, rope], ONE k_pe for all heads)
        c = RMSNorm(c; kv_a_layernorm, eps 1e-6)            (eps is the class default, NOT rms_norm_eps)
        k_nope | v = kv_b_proj(c) -> [T, heads, nope + v]  (no bias)
        q_pe, k_pe = RoPE over qk_rope_head_dim; rope_interleave (default true): the input pairs are
               (2i, 2i+1): x is first de-interleaved to [x0, x2, ..., x1, x3, ...] and then rotated
               in the rotate_half layout (apply_rotary_pos_emb_interleave)
        s = [q_nope | q_pe] . [k_nope | k_pe] * scale,  scale = (nope + rope)^-0.5, times mscale^2 with
               mscale = 0.1 * mscale_all_dim * ln(rope_scaling.factor) + 1 when rope_scaling has a
               truthy mscale_all_dim (and factor > 1)
        x = x + o_proj(causal softmax(s) v) (+bias)
        h = RMSNorm(x; post_attention_layernorm)
        l <  first_k_dense_replace: out = down(silu(gate h) * up h)       (mlp.*, intermediate_size)
        l >= first_k_dense_replace (MoE):
            logits = h gate.weight^T; p = sigmoid(logits); b = p + e_score_correction_bias
            group score = sum of the 2 largest b of each of n_group equal groups; keep topk_group groups;
            b of the other groups is masked_fill'ed with 0.0 (not -inf: HF's quirk, kept); top-k on that
            weights = p (un-biased) of the chosen; if norm_topk_prob: / (sum + 1e-20); * routed_scaling_factor
            out = sum_k w_k expert_k(h) + shared_experts(h)     (shared width moe_intermediate_size * n_shared_experts)
        x = x + out
    logits = RMSNorm(x; norm) lm_head^T    (embed_tokens when tie_word_embeddings)

RoPE tables (head dim = qk_rope_head_dim): ``inv_freq = theta^(-2i/d)``; ``yarn`` as v4.57's
_compute_yarn_parameters: the config's ``factor`` is used as is (v4.55 and older replaced it by
max_position_embeddings / original_max_position_embeddings), ``original_max_position_embeddings``
(else max_position_embeddings) only sets the correction range, ``truncate`` (default true) floors /
ceils it, cos/sin are multiplied by attention_factor (given, or mscale(factor, mscale) /
mscale(factor, mscale_all_dim) when both are truthy, else mscale(factor)).

Keys v4.57 reads nothing from (so neither do we): moe_layer_freq, topk_method, scoring_func (the
router is always sigmoid + grouped top-k), ep_size, num_nextn_predict_layers; tensors of layers
>= num_hidden_layers (the MTP module, ``model.layers.61.*`` in the release) are ignored.

Deliberate choices (documented in README.md):
  * float64 everywhere (HF runs the router in float32, everything else in the checkpoint dtype).
  * Exact ties go to the LOWEST index: in the group choice, in the expert top-k (experts are
    returned in descending order of the masked biased score) and in greedy decoding.
    ``torch.topk(sorted=False)`` leaves both order and tie choice unspecified.
  * ``num_key_value_heads`` must equal ``num_attention_heads``: HF's eager attention would
    repeat_kv the per-head MLA keys and fail otherwise (every release has them equal).
  * ``e_score_correction_bias`` is required in MoE layers (a missing buffer is not silently zero).

Besides the naive attention above (the default) ``attention="absorbed"`` computes the same thing in
the latent space: with kv_b_proj = [W_uk (nope rows) ; W_uv (v rows)] per head,
``q_nope . (W_uk c) = (W_uk^T q_nope) . c`` and ``sum_t p_t W_uv c_t = W_uv (sum_t p_t c_t)``, so the
scores use [W_uk^T q_nope | q_pe] . [c | k_pe] and the output is W_uv (p c).

Usage (CLI):
    /usr/bin/python3 tools/reference/deepseek_v3.py MODEL_DIR --tokens 1,2,3 [--greedy N] [--json]
        [--routing] [--attention naive|absorbed]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_moe import (  # noqa: E402  (independent of the engine, see qwen3_moe.py)
    ForwardOutput,
    SafetensorsFile,
    TensorStore,
    apply_rope,
    greedy,
    rms_norm,
    rope_cos_sin,
    silu,
    softmax,
)

__all__ = [
    "SafetensorsFile", "TensorStore", "ForwardOutput", "Config", "Model", "load_model", "greedy",
    "rms_norm", "sigmoid", "yarn_get_mscale", "rope_parameters", "rope_cos_sin", "apply_rope",
    "apply_rope_interleaved", "route_grouped", "softmax_scale", "LATENT_NORM_EPS", "run_cli",
]

LATENT_NORM_EPS = 1e-6  # q_a_layernorm / kv_a_layernorm: DeepseekV3RMSNorm(dim) keeps its default eps
ROUTER_NORM_EPS = 1e-20  # added to the sum of the top-k weights when norm_topk_prob

# transformers v4.57 DeepseekV3Config defaults, used for keys absent from config.json
_DEFAULTS = dict(
    vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
    num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=None, n_shared_experts=1,
    n_routed_experts=256, routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536,
    qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, n_group=8, topk_group=4,
    num_experts_per_tok=8, first_k_dense_replace=3, norm_topk_prob=True, hidden_act="silu",
    max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0,
    rope_scaling=None, rope_interleave=True, attention_bias=False,
)


# --------------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------------


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x), accurate in relative terms for large negative x as well (no overflow)."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def yarn_get_mscale(scale: float, mscale: float = 1.0) -> float:
    """0.1 * mscale * ln(scale) + 1 for scale > 1, else 1 (modeling_deepseek_v3.yarn_get_mscale)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_type_of(scaling: Optional[dict]) -> str:
    if not scaling:
        return "default"
    return scaling.get("rope_type", scaling.get("type")) or "default"


def _yarn(dim: int, theta: float, scaling: dict, max_position_embeddings: int):
    factor = float(scaling["factor"])  # v4.57: used as given
    orig = scaling.get("original_max_position_embeddings") or max_position_embeddings
    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if m and m_all:
            attention_factor = yarn_get_mscale(factor, m) / yarn_get_mscale(factor, m_all)
        else:
            attention_factor = yarn_get_mscale(factor)
    beta_fast = scaling.get("beta_fast") or 32
    beta_slow = scaling.get("beta_slow") or 1

    def dim_for_rotations(n_rot):  # the dimension whose wavelength fits n_rot times into orig
        return dim * math.log(orig / (n_rot * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = dim_for_rotations(beta_fast), dim_for_rotations(beta_slow)
    if scaling.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    extrapolated = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    interpolated = extrapolated / factor
    keep = 1.0 - np.clip((np.arange(dim // 2, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)
    return interpolated * (1.0 - keep) + extrapolated * keep, float(attention_factor)


def rope_parameters(dim: int, theta: float, scaling: Optional[dict] = None, max_position_embeddings: int = 4096):
    """``(inv_freq[dim/2], attention_factor)`` as transformers v4.57's ROPE_INIT_FUNCTIONS for
    ``default``, ``linear`` and ``yarn`` (others raise NotImplementedError)."""
    rtype = rope_type_of(scaling)
    if rtype == "default":
        return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim), 1.0
    if rtype == "linear":
        inv, _ = rope_parameters(dim, theta)
        return inv / float(scaling["factor"]), 1.0
    if rtype == "yarn":
        return _yarn(dim, theta, scaling, max_position_embeddings)
    raise NotImplementedError(f"rope scaling type {rtype!r} is not implemented in the reference")


def apply_rope_interleaved(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """apply_rotary_pos_emb_interleave: de-interleave the last axis (x0, x2, ..., x1, x3, ...), then
    rotate_half RoPE.  The result stays in the de-interleaved order (pair i at i and i + d/2)."""
    return apply_rope(np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1), cos, sin)


def softmax_scale(qk_head_dim: int, scaling: Optional[dict]) -> float:
    """DeepseekV3Attention.scaling: qk_head_dim^-0.5, times mscale^2 when rope_scaling has a truthy
    mscale_all_dim (mscale = yarn_get_mscale(rope_scaling["factor"], mscale_all_dim))."""
    s = qk_head_dim ** -0.5
    if scaling is not None:
        m_all = scaling.get("mscale_all_dim", 0)
        if m_all:
            m = yarn_get_mscale(float(scaling["factor"]), m_all)
            s = s * m * m
    return s


def _top_desc(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest entries of each row, largest first, exact ties to the lowest index."""
    return np.argsort(-values, axis=-1, kind="stable")[..., :k]


def route_grouped(router_logits: np.ndarray, bias: np.ndarray, top_k: int, n_group: int, topk_group: int,
                  norm_topk_prob: bool, routed_scaling_factor: float):
    """DeepseekV3TopkRouter (v4.57) on ``router_logits`` [T, E].

    Returns ``(experts [T, k] int64, weights [T, k])``: experts in descending order of the masked
    biased score (ties: lowest index), weights = sigmoid(logit) of each chosen expert, optionally
    divided by (their sum + 1e-20), times routed_scaling_factor.
    """
    logits = np.atleast_2d(np.asarray(router_logits, dtype=np.float64))
    T, E = logits.shape
    if E % n_group or E // n_group < 2:
        raise ValueError(f"{E} experts cannot form {n_group} groups of at least 2")
    scores = sigmoid(logits)
    biased = scores + np.asarray(bias, dtype=np.float64)[None, :]
    grouped = biased.reshape(T, n_group, E // n_group)
    group_scores = np.sort(grouped, axis=-1)[..., -2:].sum(axis=-1)  # sum of each group's top 2
    kept = np.zeros((T, n_group), dtype=bool)
    np.put_along_axis(kept, _top_desc(group_scores, topk_group), True, axis=-1)
    masked = np.where(np.repeat(kept, E // n_group, axis=1), biased, 0.0)
    experts = _top_desc(masked, top_k)
    weights = np.take_along_axis(scores, experts, axis=-1)
    if norm_topk_prob:
        weights = weights / (weights.sum(axis=-1, keepdims=True) + ROUTER_NORM_EPS)
    return experts.astype(np.int64), weights * routed_scaling_factor


# --------------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------------


def _rope_from_dict(d: dict):
    """(rope_theta, rope_scaling) from old-style keys or a newer ``rope_parameters`` dict."""
    theta, scaling = d.get("rope_theta"), d.get("rope_scaling")
    params = d.get("rope_parameters")
    if isinstance(params, dict):
        if theta is None:
            theta = params.get("rope_theta")
        if scaling is None and rope_type_of(params) != "default":
            scaling = params
    if theta is None:
        theta = _DEFAULTS["rope_theta"]
    if scaling is not None:
        scaling = dict(scaling)
    return float(theta), scaling


@dataclasses.dataclass
class Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    moe_intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    n_shared_experts: int
    n_routed_experts: int
    routed_scaling_factor: float
    kv_lora_rank: int
    q_lora_rank: Optional[int]
    qk_rope_head_dim: int
    v_head_dim: int
    qk_nope_head_dim: int
    n_group: int
    topk_group: int
    num_experts_per_tok: int
    first_k_dense_replace: int
    norm_topk_prob: bool
    hidden_act: str
    max_position_embeddings: int
    rms_norm_eps: float
    tie_word_embeddings: bool
    rope_theta: float
    rope_scaling: Optional[dict]
    rope_interleave: bool
    attention_bias: bool

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def is_moe_layer(self, layer: int) -> bool:
        return layer >= self.first_k_dense_replace  # v4.57 ignores moe_layer_freq

    @staticmethod
    def from_dict(d: dict) -> "Config":
        mt = d.get("model_type", "deepseek_v3")
        if mt != "deepseek_v3":
            raise ValueError(f"model_type {mt!r} is not deepseek_v3")
        v = dict(_DEFAULTS)
        v.update({k: d[k] for k in _DEFAULTS if k in d})  # an explicit null stays null (q_lora_rank)
        v["rope_theta"], v["rope_scaling"] = _rope_from_dict(d)
        if v["num_key_value_heads"] is None:
            v["num_key_value_heads"] = v["num_attention_heads"]
        if v["hidden_act"] != "silu":
            raise NotImplementedError(f"hidden_act {v['hidden_act']!r}")
        if float(d.get("partial_rotary_factor", 1.0)) != 1.0:
            raise NotImplementedError("partial_rotary_factor != 1 does not fit DeepSeek-V3's rope split")
        ints = ("vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "n_shared_experts", "n_routed_experts",
                "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "n_group", "topk_group",
                "num_experts_per_tok", "first_k_dense_replace", "max_position_embeddings")
        for k in ints:
            v[k] = int(v[k] or 0)
        if v["q_lora_rank"] is not None:
            v["q_lora_rank"] = int(v["q_lora_rank"])
        for k in ("routed_scaling_factor", "rms_norm_eps"):
            v[k] = float(v[k])
        for k in ("norm_topk_prob", "tie_word_embeddings", "rope_interleave", "attention_bias"):
            v[k] = bool(v[k])
        c = Config(**v)
        c.validate()
        return c

    def validate(self):
        if self.num_key_value_heads != self.num_attention_heads:
            raise NotImplementedError(
                "num_key_value_heads != num_attention_heads: HF's MLA keys are per query head and its "
                "repeat_kv would break; no DeepSeek-V3 release has this")
        if self.qk_rope_head_dim % 2:
            raise ValueError("qk_rope_head_dim must be even")
        if self.first_k_dense_replace < self.num_hidden_layers:
            E = self.n_routed_experts
            if E <= 0 or self.n_group <= 0 or E % self.n_group or E // self.n_group < 2:
                raise ValueError(f"n_routed_experts {E} must split into n_group {self.n_group} groups of >= 2")
            if not 1 <= self.topk_group <= self.n_group:
                raise ValueError("topk_group out of range")
            if not 1 <= self.num_experts_per_tok <= E:
                raise ValueError("num_experts_per_tok out of range")
        rope_parameters(2, 10000.0, self.rope_scaling, self.max_position_embeddings)  # type check only


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------


class Model:
    ATTENTION_MODES = ("naive", "absorbed")

    def __init__(self, model_dir: str, config: Config, store: TensorStore, attention: str = "naive"):
        if attention not in self.ATTENTION_MODES:
            raise ValueError(f"attention must be one of {self.ATTENTION_MODES}")
        self.model_dir = model_dir
        self.config = config
        self.store = store
        self.attention_mode = attention
        self._cache: Dict[str, np.ndarray] = {}
        self._check_tensors()

    def w(self, name: str) -> np.ndarray:
        t = self._cache.get(name)
        if t is None:
            if name not in self.store:
                raise KeyError(f"{self.model_dir}: missing tensor {name}")
            t = self._cache[name] = self.store.get(name)
        return t

    def expected_tensors(self) -> Dict[str, List[int]]:
        """Every tensor the forward pass reads, with its shape (layers >= num_hidden_layers are not read)."""
        c = self.config
        H = c.hidden_size
        out: Dict[str, List[int]] = {"model.embed_tokens.weight": [c.vocab_size, H], "model.norm.weight": [H]}
        if not c.tie_word_embeddings:
            out["lm_head.weight"] = [c.vocab_size, H]

        def mlp(prefix, width):
            out[prefix + "gate_proj.weight"] = [width, H]
            out[prefix + "up_proj.weight"] = [width, H]
            out[prefix + "down_proj.weight"] = [H, width]

        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            out[p + "input_layernorm.weight"] = [H]
            out[p + "post_attention_layernorm.weight"] = [H]
            out.update(self.attention_tensors(p + "self_attn."))
            if c.is_moe_layer(i):
                out[p + "mlp.gate.weight"] = [c.n_routed_experts, H]
                out[p + "mlp.gate.e_score_correction_bias"] = [c.n_routed_experts]
                for e in range(c.n_routed_experts):
                    mlp(p + f"mlp.experts.{e}.", c.moe_intermediate_size)
                if c.n_shared_experts:
                    mlp(p + "mlp.shared_experts.", c.moe_intermediate_size * c.n_shared_experts)
            else:
                mlp(p + "mlp.", c.intermediate_size)
        return out

    def attention_tensors(self, a: str) -> Dict[str, List[int]]:
        """MLA tensors of one layer (prefix ``a`` = "model.layers.L.self_attn.")."""
        c = self.config
        H, nh, r, rope = c.hidden_size, c.num_attention_heads, c.kv_lora_rank, c.qk_rope_head_dim
        out = {}
        if c.q_lora_rank is None:
            out[a + "q_proj.weight"] = [nh * c.qk_head_dim, H]
        else:
            out[a + "q_a_proj.weight"] = [c.q_lora_rank, H]
            out[a + "q_a_layernorm.weight"] = [c.q_lora_rank]
            out[a + "q_b_proj.weight"] = [nh * c.qk_head_dim, c.q_lora_rank]
            if c.attention_bias:
                out[a + "q_a_proj.bias"] = [c.q_lora_rank]
        out[a + "kv_a_proj_with_mqa.weight"] = [r + rope, H]
        out[a + "kv_a_layernorm.weight"] = [r]
        out[a + "kv_b_proj.weight"] = [nh * (c.qk_nope_head_dim + c.v_head_dim), r]
        out[a + "o_proj.weight"] = [H, nh * c.v_head_dim]
        if c.attention_bias:
            out[a + "kv_a_proj_with_mqa.bias"] = [r + rope]
            out[a + "o_proj.bias"] = [H]
        return out

    def _check_tensors(self):
        for name, shape in self.expected_tensors().items():
            if name not in self.store:
                raise KeyError(f"{self.model_dir}: missing tensor {name}")
            got = self.store.shape(name)
            if list(got) != list(shape):
                raise ValueError(f"{self.model_dir}: tensor {name} has shape {got}, expected {shape}")

    # pieces --------------------------------------------------------------------------------
    def _lin(self, x, name, bias=False):
        y = x @ self.w(name + ".weight").T
        return y + self.w(name + ".bias") if bias else y

    def _swiglu(self, h, prefix):
        return (silu(self._lin(h, prefix + "gate_proj")) * self._lin(h, prefix + "up_proj")) @ \
            self.w(prefix + "down_proj.weight").T

    def _rope(self, x, cos, sin):
        return apply_rope_interleaved(x, cos, sin) if self.config.rope_interleave else apply_rope(x, cos, sin)

    def attention(self, layer: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                  mode: Optional[str] = None) -> np.ndarray:
        """MLA for the normed input ``h`` [T, H]; ``mode`` "naive" (HF's computation) or "absorbed"."""
        c = self.config
        mode = mode or self.attention_mode
        T = h.shape[0]
        nh, nope, rope, vd, r = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim, \
            c.kv_lora_rank
        a = f"model.layers.{layer}.self_attn."
        if c.q_lora_rank is None:
            q = self._lin(h, a + "q_proj")
        else:
            qa = rms_norm(self._lin(h, a + "q_a_proj", c.attention_bias), self.w(a + "q_a_layernorm.weight"),
                          LATENT_NORM_EPS)
            q = self._lin(qa, a + "q_b_proj")
        q = q.reshape(T, nh, nope + rope)
        q_nope, q_pe = q[..., :nope], self._rope(q[..., nope:], cos, sin)
        kv = self._lin(h, a + "kv_a_proj_with_mqa", c.attention_bias)
        latent = rms_norm(kv[:, :r], self.w(a + "kv_a_layernorm.weight"), LATENT_NORM_EPS)  # [T, r]
        k_pe = self._rope(kv[:, None, r:], cos, sin)[:, 0, :]  # [T, rope], shared by every head
        w_kvb = self.w(a + "kv_b_proj.weight").reshape(nh, nope + vd, r)
        w_uk, w_uv = w_kvb[:, :nope, :], w_kvb[:, nope:, :]
        scale = softmax_scale(nope + rope, c.rope_scaling)
        causal = np.tril(np.ones((T, T), dtype=bool))
        rope_scores = np.einsum("qhd,kd->hqk", q_pe, k_pe)
        if mode == "naive":
            k_nope = np.einsum("hdr,tr->thd", w_uk, latent)
            value = np.einsum("hdr,tr->thd", w_uv, latent)
            scores = (np.einsum("qhd,khd->hqk", q_nope, k_nope) + rope_scores) * scale
            probs = softmax(np.where(causal[None], scores, -np.inf), axis=-1)
            out = np.einsum("hqk,khd->qhd", probs, value)
        elif mode == "absorbed":
            q_latent = np.einsum("qhd,hdr->qhr", q_nope, w_uk)  # W_uk^T q_nope, per head
            scores = (np.einsum("qhr,kr->hqk", q_latent, latent) + rope_scores) * scale
            probs = softmax(np.where(causal[None], scores, -np.inf), axis=-1)
            out_latent = np.einsum("hqk,kr->qhr", probs, latent)
            out = np.einsum("qhr,hdr->qhd", out_latent, w_uv)
        else:
            raise ValueError(f"unknown attention mode {mode!r}")
        return self._lin(out.reshape(T, nh * vd), a + "o_proj", c.attention_bias)

    def moe(self, layer: int, h: np.ndarray):
        c = self.config
        p = f"model.layers.{layer}.mlp."
        router_logits = h @ self.w(p + "gate.weight").T
        experts, weights = route_grouped(router_logits, self.w(p + "gate.e_score_correction_bias"),
                                         c.num_experts_per_tok, c.n_group, c.topk_group, c.norm_topk_prob,
                                         c.routed_scaling_factor)
        out = np.zeros_like(h)
        for e in np.unique(experts):
            rows, slot = np.nonzero(experts == e)
            out[rows] += self._swiglu(h[rows], p + f"experts.{int(e)}.") * weights[rows, slot][:, None]
        if c.n_shared_experts:
            out = out + self._swiglu(h, p + "shared_experts.")
        return out, {"experts": experts, "weights": weights, "router_logits": router_logits}

    def rope_tables(self, T: int):
        c = self.config
        inv, factor = rope_parameters(c.qk_rope_head_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings)
        return rope_cos_sin(np.arange(T), inv, factor)

    # forward -------------------------------------------------------------------------------
    def forward(self, ids: Sequence[int], return_hidden_states: bool = False, return_routing: bool = False,
                attention: Optional[str] = None):
        """Logits [T, vocab] (float64) for every position of ``ids`` (positions 0..T-1).

        With ``return_hidden_states`` or ``return_routing`` a :class:`ForwardOutput` is returned:
        hidden_states = [embeddings, layer 0 output, ...] (before model.norm); routing[i] = None for
        dense layers, else {"experts" [T,k], "weights" [T,k] (as applied, incl. routed_scaling_factor),
        "router_logits" [T,E]}.  ``attention`` overrides the model's mode for this call.
        """
        c = self.config
        ids = np.asarray(list(ids), dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token id out of range [0, {c.vocab_size})")
        cos, sin = self.rope_tables(ids.size)
        x = self.w("model.embed_tokens.weight")[ids]
        hidden = [x.copy()] if return_hidden_states else None
        routing = [] if return_routing else None
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            x = x + self.attention(i, rms_norm(x, self.w(p + "input_layernorm.weight"), c.rms_norm_eps), cos, sin,
                                   attention)
            h = rms_norm(x, self.w(p + "post_attention_layernorm.weight"), c.rms_norm_eps)
            if c.is_moe_layer(i):
                y, info = self.moe(i, h)
            else:
                y, info = self._swiglu(h, p + "mlp."), None
            x = x + y
            if hidden is not None:
                hidden.append(x.copy())
            if routing is not None:
                routing.append(info)
        x = rms_norm(x, self.w("model.norm.weight"), c.rms_norm_eps)
        logits = x @ self.w("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight").T
        if return_hidden_states or return_routing:
            return ForwardOutput(logits=logits, hidden_states=hidden, routing=routing)
        return logits


def load_model(model_dir: str, attention: str = "naive") -> Model:
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = Config.from_dict(json.load(f))
    return Model(model_dir, cfg, TensorStore(model_dir), attention=attention)


# --------------------------------------------------------------------------------------------
# CLI (shared with glm4_moe.py)
# --------------------------------------------------------------------------------------------


def run_cli(argv, load: Callable[..., object], description: str, attention_modes: Sequence[str] = ()) -> int:
    """``MODEL_DIR --tokens 1,2,3 [--greedy N] [--json] [--routing] [--attention MODE]``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="greedy-decode N new tokens")
    ap.add_argument("--json", action="store_true", help="print JSON {tokens, logits, greedy[, routing]}")
    ap.add_argument("--routing", action="store_true",
                    help='with --json: add "routing": per layer null (dense) or per-token experts and weights')
    if attention_modes:
        ap.add_argument("--attention", choices=list(attention_modes), default=attention_modes[0])
    args = ap.parse_args(argv)
    try:
        tokens = [int(t) for t in args.tokens.replace(" ", "").split(",") if t]
    except ValueError:
        ap.error("--tokens must be comma-separated integers")
    if not tokens:
        ap.error("--tokens is empty")
    model = load(args.model_dir, attention=args.attention) if attention_modes else load(args.model_dir)
    out = model.forward(tokens, return_routing=True)
    gen = greedy(model, tokens, args.greedy) if args.greedy > 0 else []
    if args.json:
        doc = {"tokens": tokens, "logits": out.logits.tolist(), "greedy": gen}
        if args.routing:
            doc["routing"] = [r if r is None else {"experts": r["experts"].tolist(), "weights": r["weights"].tolist()}
                              for r in out.routing]
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0
    print(f"model: {args.model_dir}  tokens: {tokens}")
    for t, row in enumerate(out.logits):
        print(f"  pos {t:3d}: " + "  ".join(f"{int(i)}:{row[i]:.6f}" for i in _top_desc(row, 5)))
    if gen:
        print("greedy:", ",".join(map(str, gen)))
    return 0


def main(argv=None) -> int:
    return run_cli(argv, load_model, "float64 NumPy reference forward for HF deepseek_v3 checkpoints",
                   Model.ATTENTION_MODES)


if __name__ == "__main__":
    sys.exit(main())
