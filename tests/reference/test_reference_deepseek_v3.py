"""Checks of the independent float64 deepseek_v3 reference (tools/reference/deepseek_v3.py).

The tests write tiny random deepseek_v3 checkpoints themselves (config.json + model.safetensors,
F32 and BF16) and check the reference against hand-computed routing / YaRN values, against a
per-token loop implementation written here (GPT-J style pair rotation on the ORIGINAL interleaved
layout, per-head explicit softmax, routing with sorted()), its own absorbed MLA path, and, when
Debian's python3-torch is there, a float64 torch implementation structured like transformers
v4.57's modeling_deepseek_v3.py (view/transpose de-interleave, torch.topk router).  No tern binary.

    cd tests/reference && /usr/bin/python3 -m unittest -v test_reference_deepseek_v3
"""
# tern-test: release-only (checks the NumPy reference itself; runs no tern binary)

import copy
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover - only on machines without numpy
    print("SKIPPED: numpy is not available to this python (%s)" % sys.executable)
    sys.exit(0)

try:
    import torch
except ImportError:  # the torch comparison is skipped, everything else runs
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("TERN_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
REFERENCE_DIR = os.path.join(SOURCE_DIR, "tools", "reference")
REFERENCE_SCRIPT = os.path.join(REFERENCE_DIR, "deepseek_v3.py")
sys.path.insert(0, REFERENCE_DIR)

import deepseek_v3 as R  # noqa: E402  (the reference under test)

# The released DeepSeek-V3 / R1 config.json values (deepseek-ai/DeepSeek-V3, quantization_config and
# auto_map left out).
DEEPSEEK_V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu",
    "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "use_cache": True, "v_head_dim": 128,
    "vocab_size": 129280,
}

# A tiny model with every dimension distinct, so that a transposed reshape cannot pass by accident.
TINY = {
    "model_type": "deepseek_v3", "vocab_size": 61, "hidden_size": 24, "intermediate_size": 40,
    "moe_intermediate_size": 12, "num_hidden_layers": 3, "num_attention_heads": 3, "num_key_value_heads": 3,
    "n_shared_experts": 2, "n_routed_experts": 8, "routed_scaling_factor": 2.5, "kv_lora_rank": 14,
    "q_lora_rank": 10, "qk_rope_head_dim": 6, "v_head_dim": 5, "qk_nope_head_dim": 7, "n_group": 4,
    "topk_group": 2, "num_experts_per_tok": 3, "first_k_dense_replace": 1, "norm_topk_prob": True,
    "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    "rope_theta": 10000.0, "attention_bias": False, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
    "moe_layer_freq": 1, "num_nextn_predict_layers": 1,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.8},
}
IDS = [3, 17, 60, 0, 17, 42, 8, 29]


def tiny(**overrides):
    c = copy.deepcopy(TINY)
    c.update(overrides)
    return c


# ----------------------------------------------------------------------------------------------
# checkpoint writer (test-local; independent of the reader under test)


def to_bf16_bytes(a):
    """float -> bf16, round to nearest even, little-endian bytes."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")).tobytes()


def save_checkpoint(directory, config, tensors, dtype="F32"):
    """config.json + model.safetensors; ``tensors`` = {name: float array}; norms/biases stay F32."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    header, chunks, pos = {}, [], 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name], dtype=np.float64)
        dt = dtype if a.ndim == 2 else "F32"
        raw = to_bf16_bytes(a) if dt == "BF16" else np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [pos, pos + len(raw)]}
        chunks.append(raw)
        pos += len(raw)
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + b"".join(chunks))
    return directory


def tensor_shapes(c):
    """The HF tensor names and shapes of a deepseek_v3 checkpoint, written out from the facts."""
    H, nh = c["hidden_size"], c["num_attention_heads"]
    nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    qr = c.get("q_lora_rank")
    s = {"model.embed_tokens.weight": (c["vocab_size"], H), "model.norm.weight": (H,)}
    if not c.get("tie_word_embeddings"):
        s["lm_head.weight"] = (c["vocab_size"], H)
    for L in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % L
        s[p + "input_layernorm.weight"] = (H,)
        s[p + "post_attention_layernorm.weight"] = (H,)
        if qr is None:
            s[p + "self_attn.q_proj.weight"] = (nh * (nope + rope), H)
        else:
            s[p + "self_attn.q_a_proj.weight"] = (qr, H)
            s[p + "self_attn.q_a_layernorm.weight"] = (qr,)
            s[p + "self_attn.q_b_proj.weight"] = (nh * (nope + rope), qr)
        s[p + "self_attn.kv_a_proj_with_mqa.weight"] = (r + rope, H)
        s[p + "self_attn.kv_a_layernorm.weight"] = (r,)
        s[p + "self_attn.kv_b_proj.weight"] = (nh * (nope + vd), r)
        s[p + "self_attn.o_proj.weight"] = (H, nh * vd)
        if c.get("attention_bias"):
            if qr is not None:
                s[p + "self_attn.q_a_proj.bias"] = (qr,)
            s[p + "self_attn.kv_a_proj_with_mqa.bias"] = (r + rope,)
            s[p + "self_attn.o_proj.bias"] = (H,)
        if L >= c["first_k_dense_replace"]:
            E, I = c["n_routed_experts"], c["moe_intermediate_size"]
            s[p + "mlp.gate.weight"] = (E, H)
            s[p + "mlp.gate.e_score_correction_bias"] = (E,)
            mlps = [("mlp.experts.%d." % e, I) for e in range(E)]
            if c.get("n_shared_experts"):
                mlps.append(("mlp.shared_experts.", I * c["n_shared_experts"]))
        else:
            mlps = [("mlp.", c["intermediate_size"])]
        for q, width in mlps:
            s[p + q + "gate_proj.weight"] = (width, H)
            s[p + q + "up_proj.weight"] = (width, H)
            s[p + q + "down_proj.weight"] = (H, width)
    return s


def random_tensors(c, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in tensor_shapes(c).items():
        if name.endswith("norm.weight"):
            t = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith("e_score_correction_bias"):
            t = 0.3 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            t = 0.2 * rng.standard_normal(shape)
        elif name.endswith("mlp.gate.weight"):
            t = 2.0 * rng.standard_normal(shape) / math.sqrt(shape[1])
        elif name == "model.embed_tokens.weight":
            t = rng.standard_normal(shape)
        else:
            t = rng.standard_normal(shape) / math.sqrt(shape[1])
        out[name] = t.astype(np.float32).astype(np.float64)  # exactly representable in the F32 file
    return out


class TempDirs:
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tern_ref_dsv3_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make(self, name, config, seed=0, dtype="F32", extra=None, tensors=None):
        t = random_tensors(config, seed) if tensors is None else tensors
        if extra:
            t = dict(t, **extra)
        return save_checkpoint(os.path.join(self.tmp, name), config, t, dtype)


# ----------------------------------------------------------------------------------------------
# per-token loop implementation, written from the facts independently of the vectorised reference


def loop_forward(model_dir, ids):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    W = R.TensorStore(model_dir).get  # qwen3_moe.py's reader, checked by its own tests
    nh = c["num_attention_heads"]
    nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    eps, theta, bias = c["rms_norm_eps"], float(c["rope_theta"]), c.get("attention_bias", False)
    rs = c.get("rope_scaling")

    def rms(v, w, e):
        return np.array([v[i] / math.sqrt(sum(t * t for t in v) / len(v) + e) * w[i] for i in range(len(v))])

    # rope frequencies: plain, or YaRN per v4.57 written out for these scalar inputs
    inv = [theta ** (-(2 * i) / rope) for i in range(rope // 2)]
    att = 1.0
    scale = 1.0 / math.sqrt(nope + rope)
    if rs:
        fac, orig = rs["factor"], rs.get("original_max_position_embeddings") or c["max_position_embeddings"]
        ms = lambda s, m: 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0  # noqa: E731
        att = ms(fac, rs["mscale"]) / ms(fac, rs["mscale_all_dim"]) if rs.get("mscale") and rs.get(
            "mscale_all_dim") else ms(fac, 1.0)
        lo = math.floor(rope * math.log(orig / (rs.get("beta_fast", 32) * 2 * math.pi)) / (2 * math.log(theta)))
        hi = math.ceil(rope * math.log(orig / (rs.get("beta_slow", 1) * 2 * math.pi)) / (2 * math.log(theta)))
        lo, hi = max(lo, 0), min(hi, rope - 1)
        hi = hi + 0.001 if lo == hi else hi
        for i in range(rope // 2):
            ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)
            inv[i] = inv[i] / fac * ramp + inv[i] * (1.0 - ramp)
        if rs.get("mscale_all_dim"):
            scale *= ms(fac, rs["mscale_all_dim"]) ** 2

    def rot_pairs(v, pos):
        """interleaved RoPE on the original layout: pair (2i, 2i+1) rotates by pos * inv[i]."""
        out = np.zeros_like(v)
        for i in range(rope // 2):
            a, b = v[2 * i], v[2 * i + 1]
            cs, sn = math.cos(pos * inv[i]) * att, math.sin(pos * inv[i]) * att
            out[2 * i], out[2 * i + 1] = a * cs - b * sn, b * cs + a * sn
        return out

    def silu(z):
        return np.array([t / (1.0 + math.exp(-t)) for t in z])

    def mlp(h, p):
        return W(p + "down_proj.weight") @ (silu(W(p + "gate_proj.weight") @ h) * (W(p + "up_proj.weight") @ h))

    emb = W("model.embed_tokens.weight")
    xs = [emb[t].copy() for t in ids]
    T = len(ids)
    for L in range(c["num_hidden_layers"]):
        p = "model.layers.%d.self_attn." % L
        hs = [rms(x, W("model.layers.%d.input_layernorm.weight" % L), eps) for x in xs]
        Q, K, V = [], [], []
        for t, h in enumerate(hs):
            if c.get("q_lora_rank") is None:
                q = W(p + "q_proj.weight") @ h
            else:
                qa = W(p + "q_a_proj.weight") @ h + (W(p + "q_a_proj.bias") if bias else 0.0)
                q = W(p + "q_b_proj.weight") @ rms(qa, W(p + "q_a_layernorm.weight"), 1e-6)
            kv = W(p + "kv_a_proj_with_mqa.weight") @ h + (W(p + "kv_a_proj_with_mqa.bias") if bias else 0.0)
            lat = rms(kv[:r], W(p + "kv_a_layernorm.weight"), 1e-6)
            kpe = rot_pairs(kv[r:], t)
            kvb = W(p + "kv_b_proj.weight") @ lat
            Q.append([np.concatenate([q[j * (nope + rope):j * (nope + rope) + nope],
                                      rot_pairs(q[j * (nope + rope) + nope:(j + 1) * (nope + rope)], t)])
                      for j in range(nh)])
            K.append([np.concatenate([kvb[j * (nope + vd):j * (nope + vd) + nope], kpe]) for j in range(nh)])
            V.append([kvb[j * (nope + vd) + nope:(j + 1) * (nope + vd)] for j in range(nh)])
        new = []
        for t in range(T):
            heads = []
            for j in range(nh):
                sc = [float(np.dot(Q[t][j], K[s][j])) * scale for s in range(t + 1)]
                m = max(sc)
                ex = [math.exp(z - m) for z in sc]
                heads.append(sum((ex[s] / sum(ex)) * V[s][j] for s in range(t + 1)))
            o = W(p + "o_proj.weight") @ np.concatenate(heads) + (W(p + "o_proj.bias") if bias else 0.0)
            new.append(xs[t] + o)
        xs = new
        p = "model.layers.%d." % L
        new = []
        for x in xs:
            h = rms(x, W(p + "post_attention_layernorm.weight"), eps)
            if L < c["first_k_dense_replace"]:
                new.append(x + mlp(h, p + "mlp."))
                continue
            E, G = c["n_routed_experts"], c["n_group"]
            per = E // G
            sig = [1.0 / (1.0 + math.exp(-z)) for z in W(p + "mlp.gate.weight") @ h]
            b = W(p + "mlp.gate.e_score_correction_bias")
            ch = [sig[e] + b[e] for e in range(E)]
            gs = [sum(sorted(ch[g * per:(g + 1) * per], reverse=True)[:2]) for g in range(G)]
            keep = set(sorted(range(G), key=lambda g: (-gs[g], g))[:c["topk_group"]])
            masked = [ch[e] if e // per in keep else 0.0 for e in range(E)]
            chosen = sorted(range(E), key=lambda e: (-masked[e], e))[:c["num_experts_per_tok"]]
            ws = [sig[e] for e in chosen]
            if c["norm_topk_prob"]:
                ws = [w / (sum(ws) + 1e-20) for w in ws]
            y = sum(w * c["routed_scaling_factor"] * mlp(h, p + "mlp.experts.%d." % e) for e, w in zip(chosen, ws))
            if c.get("n_shared_experts"):
                y = y + mlp(h, p + "mlp.shared_experts.")
            new.append(x + y)
        xs = new
    head = emb if c.get("tie_word_embeddings") else W("lm_head.weight")
    return np.array([head @ rms(x, W("model.norm.weight"), eps) for x in xs])


# ----------------------------------------------------------------------------------------------
# float64 torch implementation structured like transformers v4.57 modeling_deepseek_v3.py


def torch_forward(model_dir, ids):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    st = R.TensorStore(model_dir)
    W = lambda n: torch.from_numpy(st.get(n))  # noqa: E731
    F = torch.nn.functional
    nh, nope, rope, vd, r = (c[k] for k in ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim",
                                            "v_head_dim", "kv_lora_rank"))
    eps = c["rms_norm_eps"]

    def norm(x, w, e=1e-6):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e))

    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)

    # rotary tables: inv_freq from the ROPE_INIT_FUNCTIONS formulas, float64 here
    base, rs = float(c["rope_theta"]), c.get("rope_scaling")
    pos_freqs = base ** (torch.arange(0, rope, 2, dtype=torch.float64) / rope)
    inv_freq, attention_scaling, scaling = 1.0 / pos_freqs, 1.0, (nope + rope) ** -0.5
    if rs:
        factor = rs["factor"]
        orig = rs.get("original_max_position_embeddings") or c["max_position_embeddings"]

        def get_mscale(scale, mscale=1):
            return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

        attention_scaling = get_mscale(factor, rs["mscale"]) / get_mscale(factor, rs["mscale_all_dim"])
        low = math.floor(rope * math.log(orig / (rs["beta_fast"] * 2 * math.pi)) / (2 * math.log(base)))
        high = math.ceil(rope * math.log(orig / (rs["beta_slow"] * 2 * math.pi)) / (2 * math.log(base)))
        low, high = max(low, 0), min(high, rope - 1)
        ramp = torch.clamp((torch.arange(rope // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
        extra = 1 - ramp
        inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra
        if rs.get("mscale_all_dim"):
            scaling = scaling * get_mscale(factor, rs["mscale_all_dim"]) ** 2
    T = len(ids)
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * attention_scaling)[None, None], (emb.sin() * attention_scaling)[None, None]

    def rope_interleave(x):  # [b, h, s, d]
        b, h, s, d = x.shape
        x = x.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
        return x * cos + rotate_half(x) * sin

    def mlp(x, p):
        return F.linear(F.silu(F.linear(x, W(p + "gate_proj.weight"))) * F.linear(x, W(p + "up_proj.weight")),
                        W(p + "down_proj.weight"))

    x = W("model.embed_tokens.weight")[torch.tensor(ids)][None]  # [1, T, H]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for L in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % L
        a = p + "self_attn."
        h = norm(x, W(p + "input_layernorm.weight"), eps)
        if c.get("q_lora_rank") is None:
            q = F.linear(h, W(a + "q_proj.weight"))
        else:
            q = F.linear(norm(F.linear(h, W(a + "q_a_proj.weight")), W(a + "q_a_layernorm.weight")),
                         W(a + "q_b_proj.weight"))
        q = q.view(1, T, -1, nope + rope).transpose(1, 2)
        q_pass, q_rot = torch.split(q, [nope, rope], dim=-1)
        k_pass, k_rot = torch.split(F.linear(h, W(a + "kv_a_proj_with_mqa.weight")), [r, rope], dim=-1)
        k_pass = F.linear(norm(k_pass, W(a + "kv_a_layernorm.weight")), W(a + "kv_b_proj.weight"))
        k_pass, value = torch.split(k_pass.view(1, T, -1, nope + vd).transpose(1, 2), [nope, vd], dim=-1)
        q_rot, k_rot = rope_interleave(q_rot), rope_interleave(k_rot.view(1, 1, T, rope))
        query = torch.cat((q_pass, q_rot), dim=-1)
        key = torch.cat((k_pass, k_rot.expand(*k_pass.shape[:-1], -1)), dim=-1)
        probs = F.softmax(torch.matmul(query, key.transpose(2, 3)) * scaling + mask, dim=-1)
        out = torch.matmul(probs, value).transpose(1, 2).reshape(1, T, -1)
        x = x + F.linear(out, W(a + "o_proj.weight"))
        h = norm(x, W(p + "post_attention_layernorm.weight"), eps)
        if L < c["first_k_dense_replace"]:
            x = x + mlp(h, p + "mlp.")
            continue
        E, G, k = c["n_routed_experts"], c["n_group"], c["num_experts_per_tok"]
        flat = h.view(-1, h.shape[-1])
        scores = F.linear(flat, W(p + "mlp.gate.weight")).sigmoid()
        choice = scores + W(p + "mlp.gate.e_score_correction_bias")[None]
        group_scores = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=c["topk_group"], dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E)
        idx = torch.topk(choice.masked_fill(~score_mask.bool(), 0.0), k=k, dim=-1, sorted=False)[1]
        wts = scores.gather(1, idx)
        if c["norm_topk_prob"]:
            wts = wts / (wts.sum(dim=-1, keepdim=True) + 1e-20)
        wts = wts * c["routed_scaling_factor"]
        routed = torch.zeros_like(flat)
        for e in range(E):
            tok, slot = torch.where(idx == e)
            if tok.numel():
                routed.index_add_(0, tok, mlp(flat[tok], p + "mlp.experts.%d." % e) * wts[tok, slot, None])
        x = x + routed.view(1, T, -1) + mlp(h, p + "mlp.shared_experts.")
    x = norm(x, W("model.norm.weight"), eps)
    return F.linear(x, W("lm_head.weight"))[0].numpy()


# ----------------------------------------------------------------------------------------------
# (a) building blocks, hand-checked


class TestRouter(unittest.TestCase):
    @staticmethod
    def logit(p):  # sigmoid^-1, so the test can state the scores directly
        return math.log(p / (1.0 - p))

    def route(self, scores, bias, k, groups, keep, norm=True, rsf=1.0):
        logits = np.array([[self.logit(s) for s in row] for row in scores])
        return R.route_grouped(logits, np.array(bias, dtype=np.float64), k, groups, keep, norm, rsf)

    def test_groups_by_sum_of_top_two(self):
        # 3 groups of 3. group 0 has the largest single score (0.9) but top-2 sum 0.9 + 0.1 = 1.0;
        # group 1: 0.6 + 0.55 = 1.15; group 2: 0.5 + 0.45 = 0.95 -> keep group 1 only (max would pick 0)
        scores = [[0.9, 0.1, 0.05, 0.6, 0.55, 0.2, 0.5, 0.45, 0.3]]
        e, w = self.route(scores, [0.0] * 9, 2, 3, 1, norm=False, rsf=1.0)
        np.testing.assert_array_equal(e, [[3, 4]])
        np.testing.assert_allclose(w, [[0.6, 0.55]], rtol=1e-14)
        # two groups kept: 1 and 0 -> experts 0 (0.9) and 3 (0.6)
        e, w = self.route(scores, [0.0] * 9, 2, 3, 2, norm=False)
        np.testing.assert_array_equal(e, [[0, 3]])

    def test_bias_only_selects(self):
        scores = [[0.8, 0.7, 0.3, 0.2]]
        # no bias: one group of 4, top-2 = experts 0, 1
        e, _ = self.route(scores, [0, 0, 0, 0], 2, 1, 1)
        np.testing.assert_array_equal(e, [[0, 1]])
        # a bias of +0.6 on expert 3 and +0.45 on expert 2: choice 0.8 0.7 0.75 0.8 -> 0, 3 (tie -> lowest first)
        e, w = self.route(scores, [0.0, 0.0, 0.45, 0.6], 2, 1, 1, norm=False, rsf=2.0)
        np.testing.assert_array_equal(e, [[0, 3]])
        np.testing.assert_allclose(w, [[0.8 * 2.0, 0.2 * 2.0]], rtol=1e-14)  # un-biased sigmoid scores
        e, w = self.route(scores, [0.0, 0.0, 0.45, 0.6], 2, 1, 1, norm=True, rsf=2.5)
        np.testing.assert_allclose(w, [[0.8 / 1.0 * 2.5, 0.2 / 1.0 * 2.5]], rtol=1e-14)

    def test_masked_groups_are_zero_not_minus_inf(self):
        # E=4, 2 groups, keep 1. All scores 0.5; biases push group 0 to -0.1/-0.2 and group 1 to -1.5.
        # group 0 is kept (sum -0.3 > -3.0), but the masked experts 2, 3 score 0.0 > -0.1 and win:
        # HF's masked_fill(..., 0.0) quirk.  With -inf (DeepSeek's own inference code) it would be 0, 1.
        e, w = self.route([[0.5, 0.5, 0.5, 0.5]], [-0.6, -0.7, -2.0, -2.0], 2, 2, 1, norm=True, rsf=1.0)
        np.testing.assert_array_equal(e, [[2, 3]])
        np.testing.assert_allclose(w, [[0.5, 0.5]], rtol=1e-14)
        # one kept expert positive, one negative: the positive one first, then the masked zero (lowest index)
        e, _ = self.route([[0.5, 0.5, 0.5, 0.5]], [0.1, -0.7, -2.0, -2.0], 2, 2, 1)
        np.testing.assert_array_equal(e, [[0, 2]])

    def test_ties_lowest_index_and_normalisation(self):
        e, w = self.route([[0.5] * 8], [0.0] * 8, 3, 4, 2, norm=True, rsf=2.5)
        np.testing.assert_array_equal(e, [[0, 1, 2]])  # groups 0, 1 kept (tie), experts 0..2
        np.testing.assert_allclose(w, [[2.5 / 3] * 3], rtol=1e-14)
        self.assertAlmostEqual(float(w.sum()), 2.5, places=14)
        # norm: divide by (sum + 1e-20), so tiny scores still normalise
        e, w = R.route_grouped(np.array([[-50.0, -60.0, -70.0, -80.0]]), np.zeros(4), 2, 2, 2, True, 1.0)
        np.testing.assert_array_equal(e, [[0, 1]])
        s0, s1 = 1 / (1 + math.exp(50)), 1 / (1 + math.exp(60))
        np.testing.assert_allclose(w, [[s0 / (s0 + s1 + 1e-20), s1 / (s0 + s1 + 1e-20)]], rtol=1e-12)

    def test_rows_are_independent_and_shapes_checked(self):
        rng = np.random.default_rng(0)
        logits = rng.normal(size=(5, 16))
        bias = rng.normal(size=16) * 0.1
        e, w = R.route_grouped(logits, bias, 4, 4, 2, True, 2.5)
        for t in range(5):
            e1, w1 = R.route_grouped(logits[t:t + 1], bias, 4, 4, 2, True, 2.5)
            np.testing.assert_array_equal(e1[0], e[t])
            np.testing.assert_allclose(w1[0], w[t], rtol=1e-15)
            self.assertEqual(len(set(e[t].tolist())), 4)
            self.assertLessEqual(len(set((e[t] // 4).tolist())), 2)  # at most topk_group groups
        with self.assertRaises(ValueError):
            R.route_grouped(logits, bias, 4, 16, 2, True, 1.0)  # groups of 1 (torch topk(2) would fail)


class TestRopeAndScale(unittest.TestCase):
    def test_yarn_hand_checked(self):
        # dim 8, theta 1e4, factor 4, original 64: correction dims for 32 / 1 rotations are
        # 8 ln(64 / 64pi) / (2 ln 1e4) = -0.497 -> floor -1 -> 0 and 8 ln(64 / 2pi) / 18.42 = 1.008 -> ceil 2,
        # ramp (i - 0) / 2 = [0, .5, 1, 1]: inv = [1, .5*.1/4 + .5*.1, .01/4, .001/4]
        sc = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1}
        inv, att = R.rope_parameters(8, 10000.0, sc, max_position_embeddings=1000)
        np.testing.assert_allclose(inv, [1.0, 0.0625, 0.0025, 0.00025], rtol=1e-13)
        self.assertAlmostEqual(att, 0.1 * math.log(4.0) + 1.0, places=15)
        # v4.57 uses factor as given, not max_position_embeddings / original (1000 / 64 here)
        inv2, _ = R.rope_parameters(8, 10000.0, sc, max_position_embeddings=64 * 40)
        np.testing.assert_array_equal(inv2, inv)
        # truncate false: high = 1.00806..., ramp [0, 0.992, 1, 1]
        hi = 8 * math.log(64 / (2 * math.pi)) / (2 * math.log(10000.0))
        inv3, _ = R.rope_parameters(8, 10000.0, dict(sc, truncate=False), 1000)
        ramp1 = 1 / hi
        np.testing.assert_allclose(inv3, [1.0, 0.1 / 4 * ramp1 + 0.1 * (1 - ramp1), 0.0025, 0.00025], rtol=1e-13)
        # mscale / mscale_all_dim -> attention factor ratio; attention_factor given wins
        _, att = R.rope_parameters(8, 1e4, dict(sc, mscale=1.0, mscale_all_dim=0.8), 1000)
        self.assertAlmostEqual(att, (0.1 * math.log(4) + 1) / (0.08 * math.log(4) + 1), places=15)
        _, att = R.rope_parameters(8, 1e4, dict(sc, mscale=1.0, mscale_all_dim=1.0), 1000)
        self.assertEqual(att, 1.0)
        _, att = R.rope_parameters(8, 1e4, dict(sc, attention_factor=0.5, mscale=1.0, mscale_all_dim=0.8), 1000)
        self.assertEqual(att, 0.5)
        # no original_max_position_embeddings: max_position_embeddings sets the range
        a, _ = R.rope_parameters(8, 1e4, {"rope_type": "yarn", "factor": 4.0}, 64)
        np.testing.assert_array_equal(a, inv)
        with self.assertRaises(NotImplementedError):
            R.rope_parameters(8, 1e4, {"rope_type": "longrope", "factor": 2.0})

    def test_released_config(self):
        c = R.Config.from_dict(DEEPSEEK_V3_CONFIG)
        self.assertEqual((c.qk_head_dim, c.q_lora_rank, c.kv_lora_rank, c.first_k_dense_replace), (192, 1536, 512, 3))
        self.assertTrue(c.rope_interleave)  # absent from config.json: v4.57 default
        self.assertEqual([c.is_moe_layer(i) for i in (0, 2, 3, 60)], [False, False, True, True])
        m = 0.1 * math.log(40) + 1.0
        self.assertAlmostEqual(R.softmax_scale(c.qk_head_dim, c.rope_scaling), 192 ** -0.5 * m * m, places=15)
        inv, att = R.rope_parameters(64, c.rope_theta, c.rope_scaling, c.max_position_embeddings)
        self.assertEqual(att, 1.0)  # mscale == mscale_all_dim
        base = 10000.0 ** (-np.arange(0, 64, 2) / 64)
        # correction range [10, 23] (floor 10.47 / ceil 22.5): dims below kept, above divided by 40
        np.testing.assert_allclose(inv[:11], base[:11], rtol=1e-15)
        np.testing.assert_allclose(inv[23:], base[23:] / 40, rtol=1e-15)
        self.assertEqual(R.softmax_scale(192, None), 192 ** -0.5)
        self.assertEqual(R.softmax_scale(192, {"type": "yarn", "factor": 40, "mscale": 1.0}), 192 ** -0.5)

    def test_config_defaults_and_refusals(self):
        c = R.Config.from_dict({"model_type": "deepseek_v3"})
        self.assertEqual((c.q_lora_rank, c.n_group, c.topk_group, c.routed_scaling_factor), (1536, 8, 4, 2.5))
        self.assertIsNone(R.Config.from_dict(dict(DEEPSEEK_V3_CONFIG, q_lora_rank=None)).q_lora_rank)
        self.assertFalse(R.Config.from_dict(dict(DEEPSEEK_V3_CONFIG, rope_interleave=False)).rope_interleave)
        with self.assertRaises(NotImplementedError):
            R.Config.from_dict(dict(DEEPSEEK_V3_CONFIG, num_key_value_heads=16))
        with self.assertRaises(ValueError):
            R.Config.from_dict(dict(DEEPSEEK_V3_CONFIG, model_type="deepseek_v2"))
        with self.assertRaises(ValueError):
            R.Config.from_dict(dict(DEEPSEEK_V3_CONFIG, n_group=7))

    def test_interleaved_rope(self):
        d, pos = 6, 5
        inv = np.array([1.0, 0.3, 0.01])
        cos, sin = R.rope_cos_sin(np.array([pos]), inv, 0.9)
        x = np.random.default_rng(2).normal(size=(1, 1, d))
        y = R.apply_rope_interleaved(x, cos, sin)[0, 0]
        v = x[0, 0]
        for i in range(d // 2):  # input pair (2i, 2i+1) -> output slots (i, i + d/2)
            a = pos * inv[i]
            self.assertAlmostEqual(y[i], 0.9 * (v[2 * i] * math.cos(a) - v[2 * i + 1] * math.sin(a)), places=14)
            self.assertAlmostEqual(y[i + d // 2], 0.9 * (v[2 * i + 1] * math.cos(a) + v[2 * i] * math.sin(a)),
                                   places=14)


# ----------------------------------------------------------------------------------------------
# (b) tiny checkpoints


class TestTinyCheckpoints(TempDirs, unittest.TestCase):
    def test_matches_loop_implementation(self):
        for label, cfg in (("lora", tiny()),
                           ("no-qlora+bias", tiny(q_lora_rank=None, attention_bias=True, rope_scaling=None))):
            d = self.make(label, cfg, seed=1)
            m = R.load_model(d)
            got = m.forward(IDS)
            self.assertEqual(got.shape, (len(IDS), cfg["vocab_size"]))
            np.testing.assert_allclose(got, loop_forward(d, IDS), rtol=0, atol=1e-11, err_msg=label)

    def test_q_lora_rank_null_uses_q_proj(self):
        d = self.make("noq", tiny(q_lora_rank=None), seed=2)
        m = R.load_model(d)
        self.assertIn("model.layers.0.self_attn.q_proj.weight", m.store)
        self.assertNotIn("model.layers.0.self_attn.q_a_proj.weight", m.store)
        base = m.forward(IDS)
        # q_proj matters (and nothing else named q_*)
        t = random_tensors(tiny(q_lora_rank=None), 2)
        t["model.layers.1.self_attn.q_proj.weight"] = t["model.layers.1.self_attn.q_proj.weight"] * 0.5
        d2 = self.make("noq2", tiny(q_lora_rank=None), tensors=t)
        self.assertGreater(np.abs(R.load_model(d2).forward(IDS) - base).max(), 1e-3)
        # a q_lora checkpoint declared without the rank is refused (missing q_proj)
        d3 = self.make("lora-as-noq", tiny(), seed=2)
        with open(os.path.join(d3, "config.json"), "w") as f:
            json.dump(tiny(q_lora_rank=None), f)
        with self.assertRaises(KeyError):
            R.load_model(d3)

    def test_naive_equals_absorbed(self):
        for label, cfg in (("lora", tiny()), ("noq", tiny(q_lora_rank=None, attention_bias=True)),
                           ("plain-rope", tiny(rope_scaling=None, rope_interleave=False))):
            d = self.make(label, cfg, seed=3)
            naive = R.load_model(d).forward(IDS, return_hidden_states=True)
            absorbed = R.load_model(d, attention="absorbed").forward(IDS, return_hidden_states=True)
            for a, b in zip(naive.hidden_states, absorbed.hidden_states):
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-12, err_msg=label)
            np.testing.assert_allclose(naive.logits, absorbed.logits, rtol=0, atol=1e-12, err_msg=label)
        m = R.load_model(d)
        h = np.random.default_rng(4).normal(size=(5, cfg["hidden_size"]))
        cos, sin = m.rope_tables(5)
        np.testing.assert_allclose(m.attention(1, h, cos, sin, "naive"), m.attention(1, h, cos, sin, "absorbed"),
                                   rtol=0, atol=1e-13)
        with self.assertRaises(ValueError):
            R.load_model(d, attention="flash")

    def test_rope_interleave_flag(self):
        # false = rotate_half on the raw q_pe / k_pe; different logits, same for position 0 (no rotation)
        t = random_tensors(tiny(), 5)
        a = R.load_model(self.make("il", tiny(), tensors=t)).forward(IDS)
        b = R.load_model(self.make("rh", tiny(rope_interleave=False), tensors=t)).forward(IDS)
        np.testing.assert_allclose(a[0], b[0], rtol=0, atol=1e-12)
        self.assertGreater(np.abs(a[1:] - b[1:]).max(), 1e-4)

    def test_latent_norm_eps_is_fixed(self):
        # rms_norm_eps only reaches input/post/final norms; q_a_layernorm / kv_a_layernorm keep 1e-6
        cfg = tiny(rms_norm_eps=0.5)
        d = self.make("eps", cfg, seed=6)
        m = R.load_model(d)
        np.testing.assert_allclose(m.forward(IDS), loop_forward(d, IDS), rtol=0, atol=1e-11)
        h = np.random.default_rng(1).normal(size=(2, cfg["hidden_size"])) * 0.05  # small: eps matters
        kv = h @ m.w("model.layers.0.self_attn.kv_a_proj_with_mqa.weight").T
        lat = kv[:, :14]
        w = m.w("model.layers.0.self_attn.kv_a_layernorm.weight")
        expect = lat / np.sqrt((lat ** 2).mean(-1, keepdims=True) + 1e-6) * w
        self.assertEqual(R.LATENT_NORM_EPS, 1e-6)
        np.testing.assert_allclose(R.rms_norm(lat, w, R.LATENT_NORM_EPS), expect, rtol=1e-14)

    def test_mtp_layer_tensors_ignored(self):
        cfg = tiny()
        t = random_tensors(cfg, 7)
        base = R.load_model(self.make("base", cfg, tensors=t)).forward(IDS)
        L = cfg["num_hidden_layers"]
        rng = np.random.default_rng(8)
        H = cfg["hidden_size"]
        mtp = {"model.layers.%d.%s" % (L, k): rng.normal(size=s) for k, s in (
            ("enorm.weight", (H,)), ("hnorm.weight", (H,)), ("eh_proj.weight", (H, 2 * H)),
            ("embed_tokens.weight", (cfg["vocab_size"], H)), ("shared_head.norm.weight", (H,)),
            ("shared_head.head.weight", (cfg["vocab_size"], H)), ("self_attn.q_a_proj.weight", (3, 5)),
            ("mlp.gate.weight", (cfg["n_routed_experts"], H)))}
        d = self.make("mtp", cfg, tensors=t, extra=mtp)
        m = R.load_model(d)
        self.assertIn("model.layers.%d.eh_proj.weight" % L, m.store)
        np.testing.assert_array_equal(m.forward(IDS), base)

    def test_bf16_checkpoint(self):
        cfg = tiny()
        t = random_tensors(cfg, 9)
        f32 = R.load_model(self.make("f32", cfg, tensors=t))
        bf16 = R.load_model(self.make("bf16", cfg, tensors=t, dtype="BF16"))
        info = bf16.store.files["model.safetensors"].entries
        self.assertEqual(info["model.layers.1.mlp.experts.3.up_proj.weight"]["dtype"], "BF16")
        for name in ("model.layers.1.self_attn.kv_b_proj.weight", "lm_head.weight"):
            x = t[name]
            bits = np.frombuffer(to_bf16_bytes(x), dtype="<u2").astype(np.uint32) << 16
            np.testing.assert_array_equal(bf16.w(name), bits.view(np.float32).astype(np.float64).reshape(x.shape))
            self.assertLess(np.abs(bf16.w(name) - x).max(), 2 ** -8 * np.abs(x).max())
        a = f32.forward(IDS[:4], return_routing=True)
        b = bf16.forward(IDS[:4], return_routing=True)
        same = all(np.array_equal(ra["experts"], rb["experts"]) for ra, rb in zip(a.routing[1:], b.routing[1:]))
        if same:  # with equal routing the logits are close (bf16 ~ 3 significant digits)
            self.assertLess(np.abs(a.logits - b.logits).max(), 0.05 * np.abs(a.logits).max())
        np.testing.assert_allclose(bf16.forward(IDS), loop_forward(bf16.model_dir, IDS), rtol=0, atol=1e-11)

    def test_routing_output_and_dense_layers(self):
        cfg = tiny(num_hidden_layers=4, first_k_dense_replace=2, n_shared_experts=0)
        d = self.make("dense2", cfg, seed=10)
        m = R.load_model(d)
        self.assertNotIn("model.layers.2.mlp.shared_experts.up_proj.weight", m.store)
        self.assertIn("model.layers.1.mlp.gate_proj.weight", m.store)
        out = m.forward(IDS, return_hidden_states=True, return_routing=True)
        self.assertEqual(len(out.hidden_states), 5)
        self.assertIsNone(out.routing[0])
        self.assertIsNone(out.routing[1])
        for r in out.routing[2:]:
            self.assertEqual(r["experts"].shape, (len(IDS), 3))
            self.assertEqual(r["router_logits"].shape, (len(IDS), 8))
            np.testing.assert_allclose(r["weights"].sum(axis=1), 2.5, rtol=1e-12)
        np.testing.assert_allclose(out.logits, loop_forward(d, IDS), rtol=0, atol=1e-11)
        # norm_topk_prob false: weights are sigmoid * 2.5
        m.config.norm_topk_prob = False
        r = m.forward(IDS, return_routing=True).routing[2]
        sig = 1 / (1 + np.exp(-r["router_logits"]))
        np.testing.assert_allclose(r["weights"], 2.5 * np.take_along_axis(sig, r["experts"], 1), rtol=1e-14)

    def test_bias_required_and_shapes_checked(self):
        cfg = tiny()
        t = random_tensors(cfg, 11)
        del t["model.layers.2.mlp.gate.e_score_correction_bias"]
        with self.assertRaises(KeyError):
            R.load_model(self.make("nobias", cfg, tensors=t))
        t = random_tensors(cfg, 11)
        t["model.layers.0.self_attn.kv_b_proj.weight"] = t["model.layers.0.self_attn.kv_b_proj.weight"].T
        with self.assertRaises(ValueError):
            R.load_model(self.make("transposed", cfg, tensors=t))

    def test_causal_and_tied(self):
        cfg = tiny(tie_word_embeddings=True)
        d = self.make("tied", cfg, seed=12)
        m = R.load_model(d)
        self.assertNotIn("lm_head.weight", m.store)
        a = m.forward(IDS)
        b = m.forward(IDS[:4] + [1, 2, 3, 4])
        np.testing.assert_allclose(a[:4], b[:4], rtol=0, atol=1e-12)
        self.assertGreater(np.abs(a[4:] - b[4:]).max(), 1e-4)
        np.testing.assert_allclose(m.forward(IDS[:3]), a[:3], rtol=0, atol=1e-12)
        np.testing.assert_allclose(a, loop_forward(d, IDS), rtol=0, atol=1e-11)

    @unittest.skipIf(torch is None, "torch (python3-torch) is not installed")
    def test_matches_torch_hf_structure(self):
        for label, cfg in (("lora", tiny()), ("noq-plain", tiny(q_lora_rank=None, rope_scaling=None))):
            d = self.make("torch-" + label, cfg, seed=13)
            got = R.load_model(d).forward(IDS)
            want = torch_forward(d, IDS)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.abs(want).max(), err_msg=label)

    def test_greedy_and_cli(self):
        d = self.make("cli", tiny(), seed=14)
        m = R.load_model(d)
        g = R.greedy(m, [5, 6, 7], 3)
        seq = [5, 6, 7]
        for tok in g:
            self.assertEqual(tok, int(np.argmax(m.forward(seq)[-1])))
            seq.append(tok)
        for mode in ("naive", "absorbed"):
            r = subprocess.run([sys.executable, REFERENCE_SCRIPT, d, "--tokens", "5,6,7", "--greedy", "3", "--json",
                                "--routing", "--attention", mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual(doc["tokens"], [5, 6, 7])
            self.assertEqual(doc["greedy"], g)
            np.testing.assert_allclose(np.array(doc["logits"]), m.forward([5, 6, 7]), rtol=0, atol=1e-12)
            self.assertIsNone(doc["routing"][0])
            self.assertEqual(len(doc["routing"][1]["experts"]), 3)
        r = subprocess.run([sys.executable, REFERENCE_SCRIPT, d, "--tokens", "5,999"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        self.assertNotEqual(r.returncode, 0)
        r = subprocess.run([sys.executable, REFERENCE_SCRIPT, d, "--tokens", "1,2"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("pos   1:", r.stdout)


if __name__ == "__main__":
    unittest.main()
