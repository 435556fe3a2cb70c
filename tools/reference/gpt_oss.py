#!/usr/bin/env python3
"""Independent float64 NumPy reference forward pass for Hugging Face ``gpt_oss`` checkpoints
(gpt-oss-20b, gpt-oss-120b).

This file is a *reference* the Tern engine is tested against.  It shares no code with the engine
(nothing under ``src/`` is imported or parsed): it reads a Hugging Face model directory
(``config.json`` + ``model.safetensors`` or ``model.safetensors.index.json`` and its shards) with
its own small safetensors reader and computes everything in float64.  The facts it implements,
with their sources, are in docs/gpt_oss_facts.md.

Both expert layouts users have are accepted:
  * the released MXFP4 layout: ``mlp.experts.gate_up_proj_blocks`` U8 [E, 2I, H/32, 16] and
    ``_scales`` U8 [E, 2I, H/32], ``down_proj_blocks`` U8 [E, H, I/32, 16] and ``_scales``
    U8 [E, H, I/32].  Rows are output features ([out, in] orientation); inside a 16-byte block,
    byte b holds input element 2b in its LOW nibble and 2b+1 in its HIGH nibble; a value is
    FP4_E2M1[nibble] * 2**(scale - 127).
  * the dequantized float layout: ``mlp.experts.gate_up_proj`` [E, H, 2I] and ``down_proj``
    [E, I, H] ([in, out] orientation, i.e. transposed compared with the blocks).
In both, output column 2j of gate_up is gate unit j and column 2j+1 is up unit j (interleaved).

The math follows transformers' ``GptOssForCausalLM`` (modeling_gpt_oss.py, v4.57 era) and
OpenAI's reference (gpt_oss/torch/model.py), which agree on every point below:

    x = embed_tokens[ids]
    for each layer l (layer_types[l] = "sliding_attention" | "full_attention"):
        h = RMSNorm(x) * input_layernorm                          (eps 1e-5, float64 here)
        q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv           (no q/k norm)
        q, k = RoPE half-split ("rotate_half": pairs (i, i + d/2)), YaRN inv_freq, and cos/sin
               multiplied by the YaRN attention factor (0.1 ln(factor) + 1)
        s[h, i, j] = q_i . k_j / sqrt(head_dim), allowed iff j <= i (and i - j < window for
               sliding layers); masked entries are -inf
        p = softmax over [s[h, i, :], sink[h]] (one extra logit per head, in the same units as
               the scaled scores), then the sink column is dropped (rows sum to < 1)
        x = x + (p v) Wo^T + bo                                   (GQA: head h uses kv h // (nh/nkv))
        h = RMSNorm(x) * post_attention_layernorm
        r = h Wr^T + br; top-k experts by r; weights = softmax over those k logits
        for each chosen e: gu = h gate_up[e] + gate_up_bias[e]; gate = gu[0::2]; up = gu[1::2]
               gate = min(gate, limit); up = clip(up, -limit, limit)
               y_e = ((up + 1) * gate * sigmoid(alpha * gate)) down[e] + down_bias[e]
        x = x + sum_e w_e y_e
    logits = RMSNorm(x) * norm  @  lm_head^T                      (lm_head is not tied)

Deliberate choices / differences from a bf16 torch run:
  * Everything is float64 (weights are read exactly, activations never rounded).
  * Top-k ties go to the LOWEST expert index (stable sort); greedy picks the lowest token id.
  * YaRN: transformers v4.5x uses factor = max_position_embeddings / original_max_position_
    embeddings when the latter is given, OpenAI's code and transformers v5 use ``factor``; they
    agree for the released configs (131072 / 4096 = 32).  A config where they disagree is refused.
  * ``swiglu_limit`` / ``swiglu_alpha`` are read from config.json (defaults 7.0 / 1.702); the
    transformers v4.57 float expert path hard-codes both, so configs changing them are ambiguous.

Memory: the trunk is held in float64 (for the release, lm_head alone is 201088 x 2880 x 8 B =
4.6 GB; embeddings are read row by row); experts are read one at a time from disk (one slice of
the [E, ...] tensors) and cached only when all of them fit in 1 GiB, so gpt-oss-20b runs in ~10 GB.

Usage (CLI):
    /usr/bin/python3 tools/reference/gpt_oss.py MODEL_DIR --tokens 1,2,3 [--greedy N] [--json] [--routing]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import struct
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

__all__ = [
    "FP4_VALUES",
    "SafetensorsFile",
    "TensorStore",
    "Config",
    "Model",
    "ForwardOutput",
    "load_model",
    "greedy",
    "rms_norm",
    "yarn_parameters",
    "rope_inv_freq",
    "apply_rope",
    "attention_allowed",
    "sink_softmax",
    "route",
    "clamped_swiglu",
    "dequantize_mxfp4",
    "mxfp4_to_ggml_blocks",
]

# E2M1 (FP4) code -> value, index = 4-bit code (bit 3 = sign).  Same table as OpenAI's weights.py and
# transformers' integrations/mxfp4.py (FP4_VALUES).
FP4_VALUES = np.array([+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0,
                       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float64)
E8M0_BIAS = 127

# --------------------------------------------------------------------------------------------
# safetensors (own reader: float dtypes -> float64, U8 kept as uint8)
# --------------------------------------------------------------------------------------------

_DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "U8": 1}


class SafetensorsFile:
    """Minimal safetensors reader.  F64/F32/F16/BF16 -> float64; U8 -> uint8 (MXFP4 blocks/scales)."""

    def __init__(self, path: str):
        self.path = path
        self.file_size = os.path.getsize(path)
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ValueError(f"{path}: too short for a safetensors header")
            (n,) = struct.unpack("<Q", raw)
            if n > self.file_size - 8:
                raise ValueError(f"{path}: header length {n} exceeds file size {self.file_size}")
            header = json.loads(f.read(n).decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError(f"{path}: header is not a JSON object")
        self.data_start = 8 + n
        data_size = self.file_size - self.data_start
        self.metadata = header.pop("__metadata__", None)
        self.entries: Dict[str, dict] = {}
        for name, info in header.items():
            dtype = info.get("dtype")
            shape = [int(s) for s in info.get("shape", [])]
            begin, end = (int(o) for o in info["data_offsets"])
            if dtype not in _DTYPE_SIZES:
                raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
            if not (0 <= begin <= end <= data_size):
                raise ValueError(f"{path}: tensor {name}: offsets {begin}..{end} outside data ({data_size} bytes)")
            nbytes = int(np.prod(shape, dtype=np.int64)) * _DTYPE_SIZES[dtype]
            if end - begin != nbytes:
                raise ValueError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape} {dtype} ({nbytes} expected)")
            self.entries[name] = {"dtype": dtype, "shape": shape, "begin": begin, "end": end}

    def get(self, name: str, index: Optional[int] = None) -> np.ndarray:
        """The whole tensor, or with ``index`` only ``tensor[index]`` (one slice of the first axis,
        read from disk alone: one expert of an [E, ...] tensor, one row of the embeddings)."""
        e = self.entries[name]
        dtype, shape = e["dtype"], e["shape"]
        begin, end = e["begin"], e["end"]
        if index is not None:
            if not shape or not (0 <= index < shape[0]):
                raise IndexError(f"{self.path}: tensor {name}: index {index} outside {shape}")
            step = (end - begin) // shape[0]
            begin, end, shape = begin + index * step, begin + (index + 1) * step, shape[1:]
        with open(self.path, "rb") as f:
            f.seek(self.data_start + begin)
            data = f.read(end - begin)
        if len(data) != end - begin:
            raise ValueError(f"{self.path}: tensor {name}: short read")
        if dtype == "U8":
            return np.frombuffer(data, dtype=np.uint8).reshape(shape).copy()
        if dtype == "BF16":
            u16 = np.frombuffer(data, dtype="<u2")
            arr = (u16.astype(np.uint32) << 16).view(np.float32)
        elif dtype == "F16":
            arr = np.frombuffer(data, dtype="<f2")
        elif dtype == "F32":
            arr = np.frombuffer(data, dtype="<f4")
        else:
            arr = np.frombuffer(data, dtype="<f8")
        return arr.astype(np.float64).reshape(shape)


class TensorStore:
    """All tensors of a model directory (single file or sharded with an index)."""

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        index_path = os.path.join(model_dir, "model.safetensors.index.json")
        single_path = os.path.join(model_dir, "model.safetensors")
        self.files: Dict[str, SafetensorsFile] = {}
        self.where: Dict[str, str] = {}
        if os.path.exists(index_path):
            with open(index_path) as f:
                weight_map = json.load(f)["weight_map"]
            for name, shard in weight_map.items():
                if shard not in self.files:
                    self.files[shard] = SafetensorsFile(os.path.join(model_dir, shard))
                if name not in self.files[shard].entries:
                    raise ValueError(f"index maps {name} to {shard}, which does not contain it")
                self.where[name] = shard
        elif os.path.exists(single_path):
            self.files["model.safetensors"] = SafetensorsFile(single_path)
            for name in self.files["model.safetensors"].entries:
                self.where[name] = "model.safetensors"
        else:
            raise FileNotFoundError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def shape(self, name: str):
        return list(self.files[self.where[name]].entries[name]["shape"])

    def dtype(self, name: str) -> str:
        return self.files[self.where[name]].entries[name]["dtype"]

    def get(self, name: str, index: Optional[int] = None) -> np.ndarray:
        if name not in self.where:
            raise KeyError(f"tensor {name} not found in {self.model_dir}")
        return self.files[self.where[name]].get(name, index)


# --------------------------------------------------------------------------------------------
# MXFP4
# --------------------------------------------------------------------------------------------


def dequantize_mxfp4(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """HF/OpenAI MXFP4 -> float64.

    blocks: uint8 [..., G, 16]; scales: uint8 [..., G] (E8M0, bias 127).  Returns [..., G * 32]:
    element 32 g + 2 b = FP4[blocks[..., g, b] & 15], element 32 g + 2 b + 1 = FP4[blocks[..., g, b] >> 4],
    each times 2**(scales[..., g] - 127).  (transformers convert_moe_packed_tensors, OpenAI
    Checkpoint._get_mxfp4_tensor.)
    """
    blocks = np.asarray(blocks, dtype=np.uint8)
    scales = np.asarray(scales, dtype=np.uint8)
    if blocks.shape[-1] != 16 or blocks.shape[:-1] != scales.shape:
        raise ValueError(f"MXFP4 blocks {blocks.shape} / scales {scales.shape}: expected [..., G, 16] / [..., G]")
    lo = FP4_VALUES[blocks & 0x0F]
    hi = FP4_VALUES[blocks >> 4]
    vals = np.stack([lo, hi], axis=-1).reshape(*blocks.shape[:-1], 32)  # lo -> even, hi -> odd
    exp = scales.astype(np.int64) - E8M0_BIAS
    vals = np.ldexp(vals, exp[..., None])
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def mxfp4_to_ggml_blocks(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """HF/OpenAI MXFP4 -> ggml ``block_mxfp4`` bytes, bit-exact, no rounding.

    Returns uint8 [..., G, 17]: byte 0 = the E8M0 scale byte unchanged (ggml decodes it as
    2**(e - 128) and its int8 table kvalues_mxfp4 holds 2 * FP4_VALUES, so the value is the same);
    bytes 1..16 = qs[j] = code(j) | code(j + 16) << 4 where code(k) is the 4-bit code of element k of
    the 32-block, i.e. code(k) = (blocks[k // 2] >> (4 * (k % 2))) & 15.  A row of ggml blocks is the
    concatenation over G, rows are the [out] index of the blocks tensor (no transpose needed).
    """
    blocks = np.asarray(blocks, dtype=np.uint8)
    scales = np.asarray(scales, dtype=np.uint8)
    if blocks.shape[-1] != 16 or blocks.shape[:-1] != scales.shape:
        raise ValueError(f"MXFP4 blocks {blocks.shape} / scales {scales.shape}: expected [..., G, 16] / [..., G]")
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    qs = (codes[..., :16] | (codes[..., 16:] << 4)).astype(np.uint8)
    return np.concatenate([scales[..., None], qs], axis=-1)


# --------------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------------

SLIDING = "sliding_attention"
FULL = "full_attention"


@dataclasses.dataclass
class Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: Optional[dict]
    max_position_embeddings: int
    sliding_window: Optional[int]
    layer_types: List[str]
    attention_bias: bool
    tie_word_embeddings: bool
    num_local_experts: int
    num_experts_per_tok: int
    swiglu_limit: float
    swiglu_alpha: float

    @staticmethod
    def from_dict(d: dict) -> "Config":
        mt = d.get("model_type", "gpt_oss")
        if mt != "gpt_oss":
            raise ValueError(f"model_type {mt!r} is not gpt_oss")
        heads = int(d["num_attention_heads"])
        head_dim = d.get("head_dim") or int(d["hidden_size"]) // heads
        layers = int(d["num_hidden_layers"])
        # rope: old style (rope_theta + rope_scaling) or new style (rope_parameters dict)
        rope_params = d.get("rope_parameters")
        rope_scaling = d.get("rope_scaling")
        rope_theta = d.get("rope_theta")
        if isinstance(rope_params, dict):
            if rope_theta is None:
                rope_theta = rope_params.get("rope_theta")
            rtype = rope_params.get("rope_type", rope_params.get("type", "default"))
            if rope_scaling is None and rtype != "default":
                rope_scaling = rope_params
        if rope_theta is None:
            rope_theta = 150000.0  # GptOssConfig default
        if float(d.get("partial_rotary_factor", 1.0)) != 1.0:
            raise NotImplementedError("partial_rotary_factor != 1 is not supported by gpt_oss")
        layer_types = d.get("layer_types")
        if layer_types is None:  # GptOssConfig default: sliding on even layers (layer 0 sliding)
            layer_types = [SLIDING if (i + 1) % 2 else FULL for i in range(layers)]
        layer_types = [str(t) for t in layer_types]
        if len(layer_types) != layers:
            raise ValueError(f"layer_types has {len(layer_types)} entries for {layers} layers")
        for t in layer_types:
            if t not in (SLIDING, FULL):
                raise ValueError(f"layer_types: unknown attention type {t!r}")
        window = d.get("sliding_window", 128)
        if window is not None:
            window = int(window)
            if window < 1:
                raise ValueError("sliding_window must be >= 1")
        experts = d.get("num_local_experts", d.get("num_experts"))
        topk = d.get("num_experts_per_tok", d.get("experts_per_token", 4))
        if d.get("hidden_act", "silu") != "silu":
            raise NotImplementedError(f"hidden_act {d.get('hidden_act')!r}")
        return Config(
            vocab_size=int(d["vocab_size"]),
            hidden_size=int(d["hidden_size"]),
            intermediate_size=int(d["intermediate_size"]),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=int(d.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-5)),
            rope_theta=float(rope_theta),
            rope_scaling=rope_scaling,
            max_position_embeddings=int(d.get("max_position_embeddings", 131072)),
            sliding_window=window,
            layer_types=layer_types,
            attention_bias=bool(d.get("attention_bias", True)),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            num_local_experts=int(experts),
            num_experts_per_tok=int(topk),
            swiglu_limit=float(d.get("swiglu_limit", 7.0)),
            swiglu_alpha=float(d.get("swiglu_alpha", 1.702)),
        )

    def window_of(self, layer: int) -> Optional[int]:
        """Sliding window of a layer (None: full causal attention)."""
        return self.sliding_window if self.layer_types[layer] == SLIDING else None


# --------------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------------


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2, last axis) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def yarn_parameters(head_dim: int, theta: float, scaling: Optional[dict], max_position_embeddings: int) -> dict:
    """RoPE parameters as transformers' ROPE_INIT_FUNCTIONS (yarn: _compute_yarn_parameters).

    Returns {"inv_freq": [head_dim/2], "attention_factor", "factor", "low", "high", "rope_type"}
    (low/high are the ramp bounds after truncation/clamping; None for non-yarn types).
    """
    d = head_dim
    base_inv = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rtype = "default"
    if scaling:
        rtype = scaling.get("rope_type", scaling.get("type", "default"))
    if rtype == "default":
        return {"inv_freq": base_inv, "attention_factor": 1.0, "factor": 1.0, "low": None, "high": None,
                "rope_type": rtype}
    if rtype != "yarn":
        raise NotImplementedError(f"rope scaling type {rtype!r} is not implemented in the gpt_oss reference")
    factor = float(scaling["factor"])
    orig = scaling.get("original_max_position_embeddings")
    if orig:
        orig = float(orig)
        implied = max_position_embeddings / orig
        # transformers v4.5x replaces factor by max_position_embeddings / original; OpenAI's code and
        # transformers v5 keep factor.  Refuse configs where the two readings differ.
        if abs(implied - factor) > 1e-9 * max(1.0, factor):
            raise ValueError(
                f"rope_scaling.factor {factor} != max_position_embeddings / original_max_position_embeddings "
                f"= {implied}: transformers versions disagree on which one YaRN uses")
    else:
        orig = float(max_position_embeddings)

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)
    beta_fast = scaling.get("beta_fast") or 32
    beta_slow = scaling.get("beta_slow") or 1

    def corr_dim(rot):
        return (d * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(theta))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrap = 1.0 - ramp  # weight of the unscaled (extrapolated) frequency
    inv = (base_inv / factor) * (1.0 - extrap) + base_inv * extrap
    return {"inv_freq": inv, "attention_factor": float(attention_factor), "factor": factor, "low": low,
            "high": high, "rope_type": rtype}


def rope_inv_freq(head_dim: int, theta: float, scaling: Optional[dict] = None, max_position_embeddings: int = 0):
    """``(inv_freq [head_dim/2], attention_factor)``."""
    p = yarn_parameters(head_dim, theta, scaling, max_position_embeddings)
    return p["inv_freq"], p["attention_factor"]


def apply_rope(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray, attention_factor: float) -> np.ndarray:
    """Half-split RoPE (transformers' gpt_oss _apply_rotary_emb, OpenAI's _apply_rotary_emb).

    x: [T, heads, d]; element i and i + d/2 form a pair rotated by angle pos * inv_freq[i];
    cos and sin are multiplied by attention_factor (so q.k is scaled by attention_factor**2).
    """
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [T, d/2]
    cos = (np.cos(ang) * attention_factor)[:, None, :]
    sin = (np.sin(ang) * attention_factor)[:, None, :]
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def attention_allowed(T: int, window: Optional[int], offset: int = 0) -> np.ndarray:
    """Boolean [T, offset + T]: query i (absolute position offset + i) may see key j iff
    j <= offset + i and, with a window W, offset + i - j < W (W keys including itself)."""
    qi = offset + np.arange(T)[:, None]
    kj = np.arange(offset + T)[None, :]
    allowed = kj <= qi
    if window is not None:
        allowed &= (qi - kj) < window
    return allowed


def sink_softmax(scores: np.ndarray, sinks: np.ndarray) -> np.ndarray:
    """scores [heads, Tq, Tk] (-inf where masked), sinks [heads] -> probabilities [heads, Tq, Tk].

    softmax over the row with one extra logit sinks[h] appended, then that column dropped.
    """
    s = np.broadcast_to(sinks[:, None, None], scores.shape[:2] + (1,))
    combined = np.concatenate([scores, s], axis=-1)
    return softmax(combined, axis=-1)[..., :-1]


def route(router_logits: np.ndarray, top_k: int):
    """gpt-oss routing: top-k over the router logits (ties -> lowest expert index), then softmax over
    the k selected logits.  Returns ``(experts [T, k] int64, weights [T, k])``, descending order."""
    order = np.argsort(-router_logits, axis=-1, kind="stable")[:, :top_k]
    top = np.take_along_axis(router_logits, order, axis=-1)
    return order.astype(np.int64), softmax(top, axis=-1)


def clamped_swiglu(gate_up: np.ndarray, limit: float, alpha: float) -> np.ndarray:
    """gate_up [..., 2I] (interleaved: gate = [..., 0::2], up = [..., 1::2]) -> [..., I]."""
    gate = np.minimum(gate_up[..., 0::2], limit)
    up = np.clip(gate_up[..., 1::2], -limit, limit)
    return (up + 1.0) * (gate * sigmoid(alpha * gate))


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class ForwardOutput:
    logits: np.ndarray  # [T, vocab]
    # hidden_states[0] = embeddings, hidden_states[i + 1] = output of decoder layer i (before the
    # final norm).  None unless requested.
    hidden_states: Optional[List[np.ndarray]] = None
    # routing[i] = {"experts": [T, k], "weights": [T, k], "router_logits": [T, E]}; None unless requested.
    routing: Optional[List[dict]] = None


class Model:
    def __init__(self, model_dir: str, config: Config, store: TensorStore):
        self.model_dir = model_dir
        self.config = config
        self.store = store
        self._cache: Dict[str, np.ndarray] = {}
        self._expert_cache: Dict[tuple, tuple] = {}
        self.expert_layout = self._check_tensors()  # "mxfp4" or "float"

    # weights -------------------------------------------------------------------------------
    def w(self, name: str) -> np.ndarray:
        t = self._cache.get(name)
        if t is None:
            t = self.store.get(name)
            self._cache[name] = t
        return t

    def _expect(self, name: str, shape, dtypes=None):
        if name not in self.store:
            raise KeyError(f"{self.model_dir}: missing tensor {name}")
        got = self.store.shape(name)
        if list(got) != list(shape):
            raise ValueError(f"{self.model_dir}: tensor {name} has shape {got}, expected {list(shape)}")
        if dtypes is not None and self.store.dtype(name) not in dtypes:
            raise ValueError(f"{self.model_dir}: tensor {name} has dtype {self.store.dtype(name)}, expected {dtypes}")

    def _check_tensors(self) -> str:
        c = self.config
        H, hd, nh, nkv = c.hidden_size, c.head_dim, c.num_attention_heads, c.num_key_value_heads
        E, I = c.num_local_experts, c.intermediate_size
        if nh % nkv:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if hd % 2:
            raise ValueError("head_dim must be even")
        if not (1 <= c.num_experts_per_tok <= E):
            raise ValueError("num_experts_per_tok out of range")
        floats = ("F64", "F32", "F16", "BF16")
        self._expect("model.embed_tokens.weight", [c.vocab_size, H], floats)
        self._expect("model.norm.weight", [H], floats)
        if not c.tie_word_embeddings:
            self._expect("lm_head.weight", [c.vocab_size, H], floats)
        layouts = set()
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            self._expect(p + "input_layernorm.weight", [H], floats)
            self._expect(p + "post_attention_layernorm.weight", [H], floats)
            self._expect(p + "self_attn.q_proj.weight", [nh * hd, H], floats)
            self._expect(p + "self_attn.k_proj.weight", [nkv * hd, H], floats)
            self._expect(p + "self_attn.v_proj.weight", [nkv * hd, H], floats)
            self._expect(p + "self_attn.o_proj.weight", [H, nh * hd], floats)
            if c.attention_bias:
                self._expect(p + "self_attn.q_proj.bias", [nh * hd], floats)
                self._expect(p + "self_attn.k_proj.bias", [nkv * hd], floats)
                self._expect(p + "self_attn.v_proj.bias", [nkv * hd], floats)
                self._expect(p + "self_attn.o_proj.bias", [H], floats)
            self._expect(p + "self_attn.sinks", [nh], floats)
            self._expect(p + "mlp.router.weight", [E, H], floats)
            self._expect(p + "mlp.router.bias", [E], floats)
            x = p + "mlp.experts."
            self._expect(x + "gate_up_proj_bias", [E, 2 * I], floats)
            self._expect(x + "down_proj_bias", [E, H], floats)
            if (x + "gate_up_proj_blocks") in self.store:
                if H % 32 or I % 32:
                    raise ValueError("MXFP4 experts need hidden_size and intermediate_size multiples of 32")
                self._expect(x + "gate_up_proj_blocks", [E, 2 * I, H // 32, 16], ("U8",))
                self._expect(x + "gate_up_proj_scales", [E, 2 * I, H // 32], ("U8",))
                self._expect(x + "down_proj_blocks", [E, H, I // 32, 16], ("U8",))
                self._expect(x + "down_proj_scales", [E, H, I // 32], ("U8",))
                layouts.add("mxfp4")
            else:
                self._expect(x + "gate_up_proj", [E, H, 2 * I], floats)
                self._expect(x + "down_proj", [E, I, H], floats)
                layouts.add("float")
        if len(layouts) > 1:
            raise ValueError(f"{self.model_dir}: layers mix MXFP4 and float experts")
        return layouts.pop() if layouts else "float"

    def expert(self, layer: int, e: int):
        """(gate_up [H, 2I], down [I, H]) of one expert, float64, HF float orientation ([in, out]).

        Read from disk alone (one slice of the [E, ...] tensors); cached only for small models."""
        key = (layer, e)
        hit = self._expert_cache.get(key)
        if hit is not None:
            return hit
        x = f"model.layers.{layer}.mlp.experts."
        st = self.store
        if self.expert_layout == "mxfp4":
            gu = dequantize_mxfp4(st.get(x + "gate_up_proj_blocks", e), st.get(x + "gate_up_proj_scales", e))
            dn = dequantize_mxfp4(st.get(x + "down_proj_blocks", e), st.get(x + "down_proj_scales", e))
            # blocks are [out, in]; the float layout is [in, out]
            w = (np.ascontiguousarray(gu.T), np.ascontiguousarray(dn.T))
        else:
            w = (st.get(x + "gate_up_proj", e), st.get(x + "down_proj", e))
        c = self.config
        per_expert = 3 * c.hidden_size * c.intermediate_size * 8
        if per_expert * c.num_local_experts * c.num_hidden_layers <= (1 << 30):
            self._expert_cache[key] = w
        return w

    def experts(self, layer: int):
        """(gate_up [E, H, 2I], down [E, I, H]) of a whole layer (small models / tests)."""
        ws = [self.expert(layer, e) for e in range(self.config.num_local_experts)]
        return np.stack([w[0] for w in ws]), np.stack([w[1] for w in ws])

    # pieces --------------------------------------------------------------------------------
    def _linear(self, x, name, bias):
        y = x @ self.w(name + ".weight").T
        if bias:
            y = y + self.w(name + ".bias")
        return y

    def attention(self, layer: int, h: np.ndarray, positions: np.ndarray, inv_freq, att_factor) -> np.ndarray:
        c = self.config
        T = h.shape[0]
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        p = f"model.layers.{layer}.self_attn."
        b = c.attention_bias
        q = self._linear(h, p + "q_proj", b).reshape(T, nh, hd)
        k = self._linear(h, p + "k_proj", b).reshape(T, nkv, hd)
        v = self._linear(h, p + "v_proj", b).reshape(T, nkv, hd)
        q = apply_rope(q, positions, inv_freq, att_factor)
        k = apply_rope(k, positions, inv_freq, att_factor)
        rep = nh // nkv
        k = np.repeat(k, rep, axis=1)  # query head j uses kv head j // rep
        v = np.repeat(v, rep, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * (hd ** -0.5)
        allowed = attention_allowed(T, c.window_of(layer))
        scores = np.where(allowed[None, :, :], scores, -np.inf)
        probs = sink_softmax(scores, self.w(p + "sinks"))
        out = np.einsum("hqk,khd->qhd", probs, v).reshape(T, nh * hd)
        return self._linear(out, p + "o_proj", b)

    def moe(self, layer: int, h: np.ndarray):
        c = self.config
        p = f"model.layers.{layer}.mlp."
        router_logits = h @ self.w(p + "router.weight").T + self.w(p + "router.bias")
        experts, weights = route(router_logits, c.num_experts_per_tok)
        gate_up_b, down_b = self.w(p + "experts.gate_up_proj_bias"), self.w(p + "experts.down_proj_bias")
        out = np.zeros_like(h)
        for e in np.unique(experts):
            e = int(e)
            rows, slot = np.nonzero(experts == e)
            gate_up, down = self.expert(layer, e)
            gu = h[rows] @ gate_up + gate_up_b[e]
            y = clamped_swiglu(gu, c.swiglu_limit, c.swiglu_alpha) @ down + down_b[e]
            out[rows] += y * weights[rows, slot][:, None]
        return out, {"experts": experts, "weights": weights, "router_logits": router_logits}

    # forward -------------------------------------------------------------------------------
    def forward(self, ids: Sequence[int], return_hidden_states: bool = False, return_routing: bool = False):
        """Logits [T, vocab] (float64) for every position of ``ids`` (positions 0..T-1).

        With ``return_hidden_states`` or ``return_routing`` a :class:`ForwardOutput` is returned.
        """
        c = self.config
        ids = np.asarray(list(ids), dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token id out of range [0, {c.vocab_size})")
        T = ids.size
        inv_freq, att_factor = rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings)
        positions = np.arange(T)
        if "model.embed_tokens.weight" in self._cache or c.tie_word_embeddings:
            x = self.w("model.embed_tokens.weight")[ids]
        else:  # read only the rows needed (the table is 201088 x 2880 in the release)
            x = np.stack([self.store.get("model.embed_tokens.weight", int(t)) for t in ids])
        hidden = [x.copy()] if return_hidden_states else None
        routing = [] if return_routing else None
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            h = rms_norm(x, self.w(p + "input_layernorm.weight"), c.rms_norm_eps)
            x = x + self.attention(i, h, positions, inv_freq, att_factor)
            h = rms_norm(x, self.w(p + "post_attention_layernorm.weight"), c.rms_norm_eps)
            y, info = self.moe(i, h)
            x = x + y
            if hidden is not None:
                hidden.append(x.copy())
            if routing is not None:
                routing.append(info)
        x = rms_norm(x, self.w("model.norm.weight"), c.rms_norm_eps)
        head = self.w("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight")
        logits = x @ head.T
        if return_hidden_states or return_routing:
            return ForwardOutput(logits=logits, hidden_states=hidden, routing=routing)
        return logits


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


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _parse_tokens(s: str) -> List[int]:
    out = [int(t) for t in s.replace(" ", "").split(",") if t != ""]
    if not out:
        raise argparse.ArgumentTypeError("no tokens")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="float64 NumPy reference forward for HF gpt_oss checkpoints")
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True, type=_parse_tokens, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="greedy-decode N new tokens")
    ap.add_argument("--json", action="store_true", help="print JSON {tokens, logits, greedy}")
    ap.add_argument("--routing", action="store_true",
                    help="with --json: add \"routing\": per layer, per token top-k experts and weights")
    args = ap.parse_args(argv)

    model = load_model(args.model_dir)
    out = model.forward(args.tokens, return_routing=args.routing)
    logits = out.logits if isinstance(out, ForwardOutput) else out
    gen = greedy(model, args.tokens, args.greedy) if args.greedy > 0 else []
    if args.json:
        doc = {"tokens": args.tokens, "logits": logits.tolist(), "greedy": gen}
        if args.routing:
            doc["routing"] = [{"experts": r["experts"].tolist(), "weights": r["weights"].tolist()} for r in out.routing]
        json.dump(doc, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"model: {args.model_dir}  tokens: {args.tokens}  experts: {model.expert_layout}")
        for t, row in enumerate(logits):
            top = np.argsort(-row, kind="stable")[:5]
            print(f"  pos {t:3d}: " + "  ".join(f"{int(i)}:{row[i]:.6f}" for i in top))
        if gen:
            print("greedy:", ",".join(str(g) for g in gen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
