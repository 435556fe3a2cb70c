#!/usr/bin/env python3
"""Independent float64 NumPy reference forward pass for Hugging Face ``qwen3_moe`` checkpoints.

This file is the *reference* the Tern engine is tested against.  It deliberately shares no
code with the engine (nothing under ``src/`` is imported or parsed): it reads a Hugging Face
model directory (``config.json`` + ``model.safetensors`` or ``model.safetensors.index.json`` and
its shards) with its own small safetensors reader and computes everything in float64.

The math follows transformers' ``Qwen3MoeForCausalLM`` (modeling_qwen3_moe.py):

    x = embed_tokens[ids]
    for each layer:
        h = RMSNorm(x)                                   # input_layernorm
        q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)
        q, k = per-head RMSNorm over head_dim (q_norm / k_norm), THEN RoPE (rotate_half layout)
        attn = causal softmax(q k^T / sqrt(head_dim)) v, GQA (kv head = q head // (heads/kv_heads))
        x = x + attn Wo^T (+bo)
        h = RMSNorm(x)                                   # post_attention_layernorm
        MoE layer: p = softmax(h Wgate^T) over all experts, top-k by p, optional renormalisation
                   (norm_topk_prob), out = sum_k p_k * down(silu(gate(h)) * up(h))
        dense layer: out = down(silu(gate(h)) * up(h))
        x = x + out
    logits = RMSNorm(x) (model.norm) @ lm_head^T  (lm_head = embed_tokens if tie_word_embeddings)

Deliberate choices / differences from a bf16 torch run (documented, see README.md):
  * Everything (weights, activations, softmaxes, RoPE tables) is float64.  HF computes the router
    softmax in float32 and casts routing weights back to the activation dtype; we do not.
  * Top-k ties are broken towards the LOWEST expert index (stable sort on -probability).
    ``torch.topk`` does not document its tie order, so exact ties are implementation-defined there.
  * Greedy decoding picks the lowest token id on an exact logit tie (``np.argmax``).

Usage (CLI):
    /usr/bin/python3 tools/reference/qwen3_moe.py MODEL_DIR --tokens 1,2,3 [--greedy N] [--json]
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
    "SafetensorsFile",
    "TensorStore",
    "Config",
    "Model",
    "ForwardOutput",
    "load_model",
    "greedy",
    "rms_norm",
    "rope_inv_freq",
    "rope_cos_sin",
    "apply_rope",
    "route_topk",
    "read_safetensors_header",
]

# --------------------------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------------------------

_DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1}


def _e4m3_table() -> np.ndarray:
    """float64 value of every FP8 E4M3 ("fn") byte: sign, 4 exponent bits (bias 7), 3 mantissa
    bits; exponent 0 is subnormal (m/8 * 2^-6); S.1111.111 is NaN; no infinities."""
    b = np.arange(256)
    e, m = (b >> 3) & 15, (b & 7).astype(np.float64)
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * 2.0 ** (e.astype(np.float64) - 7))
    v[(e == 15) & (b & 7 == 7)] = np.nan
    return np.where(b & 0x80, -v, v)


E4M3_VALUES = _e4m3_table()


def read_safetensors_header(path: str):
    """Return ``(header_len, header_dict, file_size)`` of a .safetensors file.

    Layout: u64 little-endian header length N, then N bytes of JSON
    ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``,
    then the data block; offsets are relative to the start of the data block.
    """
    file_size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > file_size - 8:
            raise ValueError(f"{path}: header length {n} exceeds file size {file_size}")
        header = json.loads(f.read(n).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    return n, header, file_size


class SafetensorsFile:
    """Minimal safetensors reader: F64/F32/F16/BF16 tensors, returned as float64 arrays (F8_E4M3:
    the codes' values, unscaled; TensorStore applies the block scales)."""

    def __init__(self, path: str):
        self.path = path
        self.header_len, header, self.file_size = read_safetensors_header(path)
        self.data_start = 8 + self.header_len
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

    def keys(self):
        return self.entries.keys()

    def raw_bytes(self, name: str) -> bytes:
        e = self.entries[name]
        with open(self.path, "rb") as f:
            f.seek(self.data_start + e["begin"])
            data = f.read(e["end"] - e["begin"])
        if len(data) != e["end"] - e["begin"]:
            raise ValueError(f"{self.path}: tensor {name}: short read")
        return data

    def get(self, name: str) -> np.ndarray:
        e = self.entries[name]
        data = self.raw_bytes(name)
        dtype, shape = e["dtype"], e["shape"]
        if dtype == "BF16":
            u16 = np.frombuffer(data, dtype="<u2")
            arr = (u16.astype(np.uint32) << 16).view(np.float32)
        elif dtype == "F16":
            arr = np.frombuffer(data, dtype="<f2")
        elif dtype == "F32":
            arr = np.frombuffer(data, dtype="<f4")
        elif dtype == "F8_E4M3":
            arr = E4M3_VALUES[np.frombuffer(data, dtype=np.uint8)]
        else:  # F64
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
            for name in self.files["model.safetensors"].keys():
                self.where[name] = "model.safetensors"
        else:
            raise FileNotFoundError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def shape(self, name: str):
        return list(self.files[self.where[name]].entries[name]["shape"])

    def get(self, name: str) -> np.ndarray:
        if name not in self.where:
            raise KeyError(f"tensor {name} not found in {self.model_dir}")
        f = self.files[self.where[name]]
        w = f.get(name)
        if f.entries[name]["dtype"] != "F8_E4M3":
            return w
        # Fine-grained FP8 (DeepSeek-V3's weight_dequant): value = code * scale of its
        # weight_block_size block, the scales in "<name>_scale_inv".
        with open(os.path.join(self.model_dir, "config.json")) as cf:
            q = json.load(cf).get("quantization_config") or {}
        if q.get("quant_method") != "fp8":
            raise ValueError(f"{name} is F8_E4M3 but config.json has no fp8 quantization_config")
        br, bc = q["weight_block_size"]
        s = self.get(name + "_scale_inv")
        if np.isnan(w).any():
            raise ValueError(f"{name}: FP8 NaN code")
        full = np.repeat(np.repeat(s, br, axis=0), bc, axis=1)[: w.shape[0], : w.shape[1]]
        return w * full


# --------------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------------


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
    attention_bias: bool
    tie_word_embeddings: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    norm_topk_prob: bool
    decoder_sparse_step: int
    mlp_only_layers: List[int]
    sliding_window: Optional[int]
    hidden_act: str

    @staticmethod
    def from_dict(d: dict) -> "Config":
        mt = d.get("model_type", "qwen3_moe")
        if mt != "qwen3_moe":
            raise ValueError(f"model_type {mt!r} is not qwen3_moe")
        heads = int(d["num_attention_heads"])
        head_dim = d.get("head_dim") or int(d["hidden_size"]) // heads
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
            rope_theta = 10000.0  # HF default
        if float(d.get("partial_rotary_factor", 1.0)) != 1.0:
            raise NotImplementedError("partial_rotary_factor != 1 is not supported by qwen3_moe")
        num_experts = d.get("num_experts", d.get("num_local_experts", 0)) or 0
        if d.get("use_sliding_window", False):
            # transformers versions disagree on which layers get the window (max_window_layers);
            # no Qwen3-MoE release uses it, so refuse rather than guess.
            raise NotImplementedError("use_sliding_window=true is not supported by the reference")
        return Config(
            vocab_size=int(d["vocab_size"]),
            hidden_size=int(d["hidden_size"]),
            intermediate_size=int(d.get("intermediate_size", 0) or 0),
            num_hidden_layers=int(d["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(d.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
            rope_theta=float(rope_theta),
            rope_scaling=rope_scaling,
            max_position_embeddings=int(d.get("max_position_embeddings", 32768)),
            attention_bias=bool(d.get("attention_bias", False)),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            num_experts=int(num_experts),
            num_experts_per_tok=int(d.get("num_experts_per_tok", 8)),
            moe_intermediate_size=int(d.get("moe_intermediate_size", 0) or 0),
            norm_topk_prob=bool(d.get("norm_topk_prob", False)),  # HF default is False
            decoder_sparse_step=int(d.get("decoder_sparse_step", 1) or 1),
            mlp_only_layers=[int(i) for i in (d.get("mlp_only_layers") or [])],
            sliding_window=None,
            hidden_act=str(d.get("hidden_act", "silu")),
        )

    def is_moe_layer(self, layer: int) -> bool:
        return (
            layer not in self.mlp_only_layers
            and self.num_experts > 0
            and (layer + 1) % self.decoder_sparse_step == 0
        )


# --------------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------------


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2, last axis) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x: np.ndarray) -> np.ndarray:
    # x * sigmoid(x), written to avoid overflow in exp for large |x|
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def rope_inv_freq(head_dim: int, theta: float, scaling: Optional[dict] = None,
                  max_position_embeddings: int = 0):
    """Return ``(inv_freq[head_dim/2], attention_scaling)`` as transformers' ROPE_INIT_FUNCTIONS."""
    d = head_dim
    base_inv = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rtype = "default"
    if scaling:
        rtype = scaling.get("rope_type", scaling.get("type", "default"))
    if rtype == "default":
        return base_inv, 1.0
    if rtype == "linear":
        return base_inv / float(scaling["factor"]), 1.0
    if rtype == "yarn":
        factor = float(scaling["factor"])
        attention_factor = scaling.get("attention_factor")
        mscale = scaling.get("mscale")
        mscale_all_dim = scaling.get("mscale_all_dim")
        if "original_max_position_embeddings" in scaling and scaling["original_max_position_embeddings"]:
            orig = float(scaling["original_max_position_embeddings"])
            factor = max_position_embeddings / orig  # as transformers does
        else:
            orig = float(max_position_embeddings)

        def get_mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        if attention_factor is None:
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
        extrap_factor = 1.0 - ramp
        inv_interp = base_inv / factor
        inv = inv_interp * (1.0 - extrap_factor) + base_inv * extrap_factor
        return inv, float(attention_factor)
    raise NotImplementedError(f"rope scaling type {rtype!r} is not implemented in the reference")


def rope_cos_sin(positions: np.ndarray, inv_freq: np.ndarray, attention_scaling: float = 1.0):
    """cos/sin tables [T, head_dim]: freqs duplicated across both halves (HF emb = cat(freqs, freqs))."""
    freqs = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb) * attention_scaling, np.sin(emb) * attention_scaling


def rotate_half(x: np.ndarray) -> np.ndarray:
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x: [T, heads, head_dim]; cos/sin: [T, head_dim]."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


def route_topk(router_logits: np.ndarray, top_k: int, norm_topk_prob: bool):
    """Qwen3-MoE routing: softmax over all experts, top-k by probability, optional renormalisation.

    Returns ``(experts[T, k] int64, weights[T, k] float64)``; experts of a row are in descending
    probability order, exact ties resolved towards the lowest expert index.
    """
    probs = softmax(router_logits, axis=-1)
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(probs, order, axis=-1)
    if norm_topk_prob:
        weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return order.astype(np.int64), weights


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class ForwardOutput:
    logits: np.ndarray  # [T, vocab]
    # hidden_states[0] = embeddings, hidden_states[i + 1] = output of decoder layer i (before the
    # final norm).  None unless requested.
    hidden_states: Optional[List[np.ndarray]] = None
    # routing[i] = None for dense layers, else {"experts": [T,k], "weights": [T,k],
    # "router_logits": [T,E]}.  None unless requested.
    routing: Optional[List[Optional[dict]]] = None


class Model:
    def __init__(self, model_dir: str, config: Config, store: TensorStore):
        self.model_dir = model_dir
        self.config = config
        self.store = store
        self._cache: Dict[str, np.ndarray] = {}
        self._check_tensors()

    # weights -------------------------------------------------------------------------------
    def w(self, name: str) -> np.ndarray:
        t = self._cache.get(name)
        if t is None:
            t = self.store.get(name)
            self._cache[name] = t
        return t

    def _expect(self, name: str, shape):
        if name not in self.store:
            raise KeyError(f"{self.model_dir}: missing tensor {name}")
        got = self.store.shape(name)
        if list(got) != list(shape):
            raise ValueError(f"{self.model_dir}: tensor {name} has shape {got}, expected {list(shape)}")

    def _check_tensors(self):
        c = self.config
        H, hd, nh, nkv = c.hidden_size, c.head_dim, c.num_attention_heads, c.num_key_value_heads
        if nh % nkv:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        self._expect("model.embed_tokens.weight", [c.vocab_size, H])
        self._expect("model.norm.weight", [H])
        if not c.tie_word_embeddings:
            self._expect("lm_head.weight", [c.vocab_size, H])
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            self._expect(p + "input_layernorm.weight", [H])
            self._expect(p + "post_attention_layernorm.weight", [H])
            self._expect(p + "self_attn.q_proj.weight", [nh * hd, H])
            self._expect(p + "self_attn.k_proj.weight", [nkv * hd, H])
            self._expect(p + "self_attn.v_proj.weight", [nkv * hd, H])
            self._expect(p + "self_attn.o_proj.weight", [H, nh * hd])
            self._expect(p + "self_attn.q_norm.weight", [hd])
            self._expect(p + "self_attn.k_norm.weight", [hd])
            if c.attention_bias:
                self._expect(p + "self_attn.q_proj.bias", [nh * hd])
                self._expect(p + "self_attn.k_proj.bias", [nkv * hd])
                self._expect(p + "self_attn.v_proj.bias", [nkv * hd])
                self._expect(p + "self_attn.o_proj.bias", [H])
            if c.is_moe_layer(i):
                I = c.moe_intermediate_size
                self._expect(p + "mlp.gate.weight", [c.num_experts, H])
                for e in range(c.num_experts):
                    self._expect(p + f"mlp.experts.{e}.gate_proj.weight", [I, H])
                    self._expect(p + f"mlp.experts.{e}.up_proj.weight", [I, H])
                    self._expect(p + f"mlp.experts.{e}.down_proj.weight", [H, I])
            else:
                I = c.intermediate_size
                self._expect(p + "mlp.gate_proj.weight", [I, H])
                self._expect(p + "mlp.up_proj.weight", [I, H])
                self._expect(p + "mlp.down_proj.weight", [H, I])
        if c.hidden_act != "silu":
            raise NotImplementedError(f"hidden_act {c.hidden_act!r}")
        if c.num_experts > 0 and not (1 <= c.num_experts_per_tok <= c.num_experts):
            raise ValueError("num_experts_per_tok out of range")

    # pieces --------------------------------------------------------------------------------
    def _linear(self, x, name, bias=False):
        y = x @ self.w(name + ".weight").T
        if bias:
            y = y + self.w(name + ".bias")
        return y

    def _mlp(self, h, prefix):
        g = h @ self.w(prefix + "gate_proj.weight").T
        u = h @ self.w(prefix + "up_proj.weight").T
        return (silu(g) * u) @ self.w(prefix + "down_proj.weight").T

    def attention(self, layer: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        c = self.config
        T = h.shape[0]
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        p = f"model.layers.{layer}.self_attn."
        b = c.attention_bias
        q = self._linear(h, p + "q_proj", b).reshape(T, nh, hd)
        k = self._linear(h, p + "k_proj", b).reshape(T, nkv, hd)
        v = self._linear(h, p + "v_proj", b).reshape(T, nkv, hd)
        q = rms_norm(q, self.w(p + "q_norm.weight"), c.rms_norm_eps)
        k = rms_norm(k, self.w(p + "k_norm.weight"), c.rms_norm_eps)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        rep = nh // nkv
        k = np.repeat(k, rep, axis=1)  # query head j uses kv head j // rep (HF repeat_kv)
        v = np.repeat(v, rep, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * (hd ** -0.5)
        qi = np.arange(T)[:, None]
        ki = np.arange(T)[None, :]
        allowed = ki <= qi
        if c.sliding_window is not None:
            allowed &= ki > qi - c.sliding_window
        scores = np.where(allowed[None, :, :], scores, -np.inf)
        probs = softmax(scores, axis=-1)
        out = np.einsum("hqk,khd->qhd", probs, v).reshape(T, nh * hd)
        return self._linear(out, p + "o_proj", b)

    def moe(self, layer: int, h: np.ndarray):
        c = self.config
        p = f"model.layers.{layer}.mlp."
        router_logits = h @ self.w(p + "gate.weight").T
        experts, weights = route_topk(router_logits, c.num_experts_per_tok, c.norm_topk_prob)
        out = np.zeros_like(h)
        for e in np.unique(experts):
            rows, slot = np.nonzero(experts == e)
            y = self._mlp(h[rows], p + f"experts.{int(e)}.")
            out[rows] += y * weights[rows, slot][:, None]
        return out, {"experts": experts, "weights": weights, "router_logits": router_logits}

    # forward -------------------------------------------------------------------------------
    def forward(self, ids: Sequence[int], return_hidden_states: bool = False,
                return_routing: bool = False):
        """Logits [T, vocab] (float64) for every position of ``ids``.

        With ``return_hidden_states`` or ``return_routing`` a :class:`ForwardOutput` is returned
        instead of the bare logits array.
        """
        c = self.config
        ids = np.asarray(list(ids), dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token id out of range [0, {c.vocab_size})")
        T = ids.size
        inv_freq, att_scale = rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings)
        cos, sin = rope_cos_sin(np.arange(T), inv_freq, att_scale)
        x = self.w("model.embed_tokens.weight")[ids]
        hidden = [x.copy()] if return_hidden_states else None
        routing = [] if return_routing else None
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            h = rms_norm(x, self.w(p + "input_layernorm.weight"), c.rms_norm_eps)
            x = x + self.attention(i, h, cos, sin)
            h = rms_norm(x, self.w(p + "post_attention_layernorm.weight"), c.rms_norm_eps)
            if c.is_moe_layer(i):
                y, info = self.moe(i, h)
            else:
                y, info = self._mlp(h, p + "mlp."), None
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
    seq = list(int(i) for i in ids)
    new: List[int] = []
    for _ in range(n):
        logits = model.forward(seq)
        nxt = int(np.argmax(logits[-1]))
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
    ap = argparse.ArgumentParser(description="float64 NumPy reference forward for HF qwen3_moe checkpoints")
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True, type=_parse_tokens, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="greedy-decode N new tokens")
    ap.add_argument("--json", action="store_true", help="print JSON {tokens, logits, greedy}")
    ap.add_argument("--routing", action="store_true",
                    help="with --json: add \"routing\": per layer, per token top-k experts (null for dense layers)")
    args = ap.parse_args(argv)

    model = load_model(args.model_dir)
    out = model.forward(args.tokens, return_routing=args.routing)
    logits = out.logits if isinstance(out, ForwardOutput) else out
    gen = greedy(model, args.tokens, args.greedy) if args.greedy > 0 else []
    if args.json:
        doc = {"tokens": args.tokens, "logits": logits.tolist(), "greedy": gen}
        if args.routing:
            doc["routing"] = [None if r is None else {"experts": r["experts"].tolist(), "weights": r["weights"].tolist()}
                              for r in out.routing]
        json.dump(doc, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"model: {args.model_dir}  tokens: {args.tokens}")
        for t, row in enumerate(logits):
            top = np.argsort(-row, kind="stable")[:5]
            print(f"  pos {t:3d}: " + "  ".join(f"{int(i)}:{row[i]:.6f}" for i in top))
        if gen:
            print("greedy:", ",".join(str(g) for g in gen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
