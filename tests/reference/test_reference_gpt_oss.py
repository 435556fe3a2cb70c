"""Checks of the independent float64 gpt_oss reference (tools/reference/gpt_oss.py).

The tests write small random gpt_oss checkpoints themselves (both expert layouts: the released
MXFP4 `_blocks`/`_scales` one and the dequantized float `gate_up_proj`/`down_proj` one) and compare
the reference against an independent PyTorch float64 implementation written here, structured like
OpenAI's gpt_oss/torch/model.py (fused qkv, triu/tril masks, sinks concatenated as an extra column,
NTK-by-parts RoPE with concentration, einsum experts on [E, out, in] weights dequantized the way
OpenAI's weights.py does).  They need only numpy and torch (Debian's python3-torch); no tern binary.

    cd tests/reference && /usr/bin/python3 -m unittest -v test_reference_gpt_oss
"""
# tern-test: release-only (checks the NumPy reference itself against PyTorch; runs no tern binary)

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
except ImportError:  # the torch comparisons are skipped, everything else runs
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("TERN_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
REFERENCE_DIR = os.path.join(SOURCE_DIR, "tools", "reference")
REFERENCE_SCRIPT = os.path.join(REFERENCE_DIR, "gpt_oss.py")
sys.path.insert(0, REFERENCE_DIR)

import gpt_oss as R  # noqa: E402  (the reference under test)
import gguf_quants as GQ  # noqa: E402  (independent ggml block formats, for the MXFP4 mapping)

REL_TOL = 1e-9  # reference vs torch float64: max |diff| <= REL_TOL * max |logit|

# The released gpt-oss-20b config.json (Hugging Face openai/gpt-oss-20b), verbatim values.
GPT_OSS_20B_CONFIG = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
    "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8,
    "num_local_experts": 32, "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"],
                            "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088,
}

# Small test model: H and I multiples of 32 (MXFP4 blocks run along the input dimension), window 4,
# YaRN with truncate false like the release and 0 < low < high < d/2 - 1 (OpenAI's assertion).
SMALL_CONFIG = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True,
    "hidden_size": 64, "intermediate_size": 64, "head_dim": 16, "num_attention_heads": 4,
    "num_key_value_heads": 2, "num_hidden_layers": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
    "vocab_size": 97, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": 4,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "max_position_embeddings": 4096, "swiglu_limit": 7.0, "tie_word_embeddings": False,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                     "original_max_position_embeddings": 1024, "truncate": False},
}

PROMPT = [5, 17, 3, 88, 42, 42, 7, 60, 1, 96, 33, 0, 71, 12]  # 14 tokens > window 4


# ----------------------------------------------------------------------------------------------
# writing checkpoints


def bf16_round(x):
    """float -> nearest bf16 (ties to even), returned as float64 values and raw bits."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    vals = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return vals, bits


def write_safetensors(path, tensors):
    """tensors = {name: (dtype_str, shape, raw_bytes)}."""
    header, blobs, off = {}, [], 0
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


FP4_MAGS = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantize_mxfp4_test(w):
    """Test-local MXFP4 quantizer of w [..., out, in] (in % 32 == 0), HF/OpenAI layout.

    Returns (blocks uint8 [..., out, in/32, 16], scales uint8 [..., out, in/32], dequantized float64
    [..., out, in]).  The dequantized values are rebuilt from the codes here, independently of the
    reference.  Scale: 2**(floor(log2(amax)) - 2), so amax / scale is in [4, 8)."""
    w = np.asarray(w, dtype=np.float64)
    *lead, out, inn = w.shape
    g = w.reshape(*lead, out, inn // 32, 32)
    amax = np.max(np.abs(g), axis=-1)
    e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2, -127).astype(np.int64)
    scale = np.ldexp(1.0, e)
    r = np.abs(g) / scale[..., None]
    mag_code = np.argmin(np.abs(r[..., None] - FP4_MAGS), axis=-1)
    codes = (mag_code | np.where(g < 0, 8, 0)).astype(np.uint8)
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    scales = (e + 127).astype(np.uint8)
    deq = np.where(codes >= 8, -1.0, 1.0) * FP4_MAGS[codes & 7] * scale[..., None]
    return blocks, scales, deq.reshape(*lead, out, inn)


def make_params(cfg, seed):
    """Random weights (float64 values exactly representable in the dtype they are written in).

    Returns {name: (dtype, array)}; expert weights are returned in the OpenAI [E, out, in]
    orientation under the keys '#mlp1.L' (gate/up interleaved rows) and '#mlp2.L'."""
    rng = np.random.default_rng(seed)
    H, I, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
    nh, nkv, hd, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["vocab_size"]
    P = {}

    def f32(name, a):
        P[name] = ("F32", np.asarray(a, dtype=np.float32).astype(np.float64))

    def bf16(name, a):
        P[name] = ("BF16", bf16_round(a)[0])

    def lin(n_out, n_in, std=1.0):
        return rng.uniform(-1, 1, (n_out, n_in)) * std * math.sqrt(3.0 / n_in)

    bf16("model.embed_tokens.weight", rng.standard_normal((V, H)))
    f32("model.norm.weight", 1 + rng.uniform(-0.25, 0.25, H))
    bf16("lm_head.weight", lin(V, H))
    for L in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % L
        f32(p + "input_layernorm.weight", 1 + rng.uniform(-0.25, 0.25, H))
        f32(p + "post_attention_layernorm.weight", 1 + rng.uniform(-0.25, 0.25, H))
        f32(p + "self_attn.q_proj.weight", lin(nh * hd, H, 2.0))
        f32(p + "self_attn.k_proj.weight", lin(nkv * hd, H, 2.0))
        f32(p + "self_attn.v_proj.weight", lin(nkv * hd, H))
        f32(p + "self_attn.o_proj.weight", lin(H, nh * hd))
        f32(p + "self_attn.q_proj.bias", rng.uniform(-0.1, 0.1, nh * hd))
        f32(p + "self_attn.k_proj.bias", rng.uniform(-0.1, 0.1, nkv * hd))
        f32(p + "self_attn.v_proj.bias", rng.uniform(-0.1, 0.1, nkv * hd))
        f32(p + "self_attn.o_proj.bias", rng.uniform(-0.1, 0.1, H))
        bf16(p + "self_attn.sinks", rng.normal(1.0, 1.5, nh))
        bf16(p + "mlp.router.weight", lin(E, H, 2.0))
        bf16(p + "mlp.router.bias", rng.uniform(-0.2, 0.2, E))
        # gate/up pre-activations of std ~4 so the swiglu clamps (gate > 7, |up| > 7) are exercised
        P["#mlp1.%d" % L] = rng.standard_normal((E, 2 * I, H)) * (4.0 / math.sqrt(H))
        P["#mlp2.%d" % L] = rng.standard_normal((E, H, I)) * (1.0 / math.sqrt(I))
        f32(p + "mlp.experts.gate_up_proj_bias", rng.uniform(-0.1, 0.1, (E, 2 * I)))
        f32(p + "mlp.experts.down_proj_bias", rng.uniform(-0.1, 0.1, (E, H)))
    # quantize the experts once: both layouts then hold exactly the same values
    for L in range(cfg["num_hidden_layers"]):
        for key in ("#mlp1.%d" % L, "#mlp2.%d" % L):
            blocks, scales, deq = quantize_mxfp4_test(P[key])
            P[key] = deq
            P[key + ".blocks"] = blocks
            P[key + ".scales"] = scales
    return P


def encode(dtype, arr):
    if dtype == "F32":
        return np.asarray(arr, dtype="<f4").tobytes()
    if dtype == "BF16":
        return bf16_round(arr)[1].astype("<u2").tobytes()
    if dtype == "U8":
        return np.asarray(arr, dtype=np.uint8).tobytes()
    raise ValueError(dtype)


def checkpoint_tensors(cfg, P, layout):
    """{name: (dtype, shape, raw)} in the HF layout: 'mxfp4' or 'float'."""
    out = {}
    for name, v in P.items():
        if not name.startswith("#"):
            dt, arr = v
            out[name] = (dt, arr.shape, encode(dt, arr))
    for L in range(cfg["num_hidden_layers"]):
        x = "model.layers.%d.mlp.experts." % L
        m1, m2 = "#mlp1.%d" % L, "#mlp2.%d" % L
        if layout == "mxfp4":
            for proj, key in (("gate_up_proj", m1), ("down_proj", m2)):
                b, s = P[key + ".blocks"], P[key + ".scales"]
                out[x + proj + "_blocks"] = ("U8", b.shape, encode("U8", b))
                out[x + proj + "_scales"] = ("U8", s.shape, encode("U8", s))
        else:  # float layout is [E, in, out]: transposed compared with OpenAI's [E, out, in]
            gu = np.ascontiguousarray(P[m1].transpose(0, 2, 1))
            dn = np.ascontiguousarray(P[m2].transpose(0, 2, 1))
            out[x + "gate_up_proj"] = ("F32", gu.shape, encode("F32", gu))
            out[x + "down_proj"] = ("F32", dn.shape, encode("F32", dn))
    return out


def write_model(root, name, cfg, P, layout, shards=1):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    tensors = checkpoint_tensors(cfg, P, layout)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    else:
        names = sorted(tensors)
        weight_map = {}
        for s in range(shards):
            fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = {n: tensors[n] for n in names[s::shards]}
            write_safetensors(os.path.join(d, fname), part)
            weight_map.update({n: fname for n in part})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return d


# ----------------------------------------------------------------------------------------------
# independent torch float64 implementation, structured like OpenAI's gpt_oss/torch/model.py


def torch_mxfp4(blocks, scales):
    """OpenAI weights.py _get_mxfp4_tensor: lo nibble -> even column, hi -> odd, ldexp by scale - 127."""
    lut = torch.tensor(list(R.FP4_VALUES), dtype=torch.float64)
    blocks = torch.from_numpy(np.asarray(blocks, dtype=np.uint8))
    scales = torch.from_numpy(np.asarray(scales, dtype=np.uint8)).to(torch.int32) - 127
    *prefix, G, B = blocks.shape
    rows = int(np.prod(prefix)) * G
    blk = blocks.reshape(rows, B)
    exp = scales.reshape(rows, 1)
    out = torch.empty(rows, B * 2, dtype=torch.float64)
    out[:, 0::2] = lut[(blk & 0x0F).long()]
    out[:, 1::2] = lut[(blk >> 4).long()]
    out = torch.ldexp(out, exp)
    return out.reshape(*prefix, G * B * 2)


class TorchGptOss:
    def __init__(self, cfg, P, layout):
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))  # noqa: E731
        self.cfg = cfg
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.eps = cfg["rms_norm_eps"]
        self.limit = cfg.get("swiglu_limit", 7.0)
        self.k = cfg["num_experts_per_tok"]
        self.embedding = t(P["model.embed_tokens.weight"][1])
        self.unembedding = t(P["lm_head.weight"][1])
        self.norm = t(P["model.norm.weight"][1])
        self.blocks = []
        for L in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % L
            g = lambda n: t(P[p + n][1])  # noqa: E731
            blk = {
                "attn_norm": g("input_layernorm.weight"),
                "qkv_w": torch.cat([g("self_attn.q_proj.weight"), g("self_attn.k_proj.weight"), g("self_attn.v_proj.weight")], 0),
                "qkv_b": torch.cat([g("self_attn.q_proj.bias"), g("self_attn.k_proj.bias"), g("self_attn.v_proj.bias")], 0),
                "out_w": g("self_attn.o_proj.weight"), "out_b": g("self_attn.o_proj.bias"),
                "sinks": g("self_attn.sinks"),
                "sliding_window": cfg["sliding_window"] if cfg["layer_types"][L] == "sliding_attention" else 0,
                "mlp_norm": g("post_attention_layernorm.weight"),
                "gate_w": g("mlp.router.weight"), "gate_b": g("mlp.router.bias"),
                "mlp1_b": g("mlp.experts.gate_up_proj_bias"), "mlp2_b": g("mlp.experts.down_proj_bias"),
            }
            if layout == "mxfp4":  # dequantize from the bytes, OpenAI's way: [E, out, in]
                blk["mlp1_w"] = torch_mxfp4(P["#mlp1.%d.blocks" % L], P["#mlp1.%d.scales" % L])
                blk["mlp2_w"] = torch_mxfp4(P["#mlp2.%d.blocks" % L], P["#mlp2.%d.scales" % L])
            else:  # from the HF float layout [E, in, out]
                blk["mlp1_w"] = t(P["#mlp1.%d" % L].transpose(0, 2, 1)).transpose(1, 2).contiguous()
                blk["mlp2_w"] = t(P["#mlp2.%d" % L].transpose(0, 2, 1)).transpose(1, 2).contiguous()
            self.blocks.append(blk)
        rs = cfg.get("rope_scaling") or {}
        self.rope = dict(base=float(cfg["rope_theta"]), initial_context_length=rs.get("original_max_position_embeddings", 4096),
                         scaling_factor=rs.get("factor", 1.0), ntk_alpha=rs.get("beta_slow", 1.0),
                         ntk_beta=rs.get("beta_fast", 32.0))

    def rmsnorm(self, x, scale):
        return x * torch.rsqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps) * scale

    def concentration_and_inv_freq(self):
        r, hd = self.rope, self.hd
        freq = r["base"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        if r["scaling_factor"] > 1.0:
            concentration = 0.1 * math.log(r["scaling_factor"]) + 1.0
            d_half = hd / 2
            low = d_half * math.log(r["initial_context_length"] / (r["ntk_beta"] * 2 * math.pi)) / math.log(r["base"])
            high = d_half * math.log(r["initial_context_length"] / (r["ntk_alpha"] * 2 * math.pi)) / math.log(r["base"])
            assert 0 < low < high < d_half - 1
            interpolation = 1.0 / (r["scaling_factor"] * freq)
            extrapolation = 1.0 / freq
            ramp = (torch.arange(d_half, dtype=torch.float64) - low) / (high - low)
            mask = 1 - ramp.clamp(0, 1)
            inv_freq = interpolation * (1 - mask) + extrapolation * mask
        else:
            concentration, inv_freq = 1.0, 1.0 / freq
        return concentration, inv_freq

    def rope_qk(self, q, k):
        n = q.shape[0]
        conc, inv_freq = self.concentration_and_inv_freq()
        freqs = torch.einsum("i,j->ij", torch.arange(n, dtype=torch.float64), inv_freq)
        cos, sin = freqs.cos() * conc, freqs.sin() * conc

        def rot(x):
            shape = x.shape
            x = x.view(n, -1, self.hd)
            c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
            x1, x2 = torch.chunk(x, 2, dim=-1)
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).reshape(shape)

        return rot(q), rot(k)

    @staticmethod
    def sdpa(Q, K, V, S, sm_scale, sliding_window):
        n_tokens, n_heads, q_mult, d_head = Q.shape
        K = K[:, :, None, :].expand(-1, -1, q_mult, -1)
        V = V[:, :, None, :].expand(-1, -1, q_mult, -1)
        S = S.reshape(n_heads, q_mult, 1, 1).expand(-1, -1, n_tokens, -1)
        mask = torch.triu(Q.new_full((n_tokens, n_tokens), -float("inf")), diagonal=1)
        if sliding_window > 0:
            mask += torch.tril(mask.new_full((n_tokens, n_tokens), -float("inf")), diagonal=-sliding_window)
        QK = torch.einsum("qhmd,khmd->hmqk", Q, K) * sm_scale
        QK = QK + mask[None, None, :, :]
        QK = torch.cat([QK, S], dim=-1)
        W = torch.softmax(QK, dim=-1)[..., :-1]
        attn = torch.einsum("hmqk,khmd->qhmd", W, V)
        return attn.reshape(n_tokens, -1)

    def attn_block(self, b, x):
        nh, nkv, hd = self.nh, self.nkv, self.hd
        t = self.rmsnorm(x, b["attn_norm"])
        qkv = t @ b["qkv_w"].T + b["qkv_b"]
        q = qkv[:, : nh * hd].contiguous()
        k = qkv[:, nh * hd: (nh + nkv) * hd].contiguous()
        v = qkv[:, (nh + nkv) * hd:].contiguous()
        q = q.view(-1, nkv, nh // nkv, hd)
        k = k.view(-1, nkv, hd)
        v = v.view(-1, nkv, hd)
        q, k = self.rope_qk(q, k)
        t = self.sdpa(q, k, v, b["sinks"], 1 / math.sqrt(hd), b["sliding_window"])
        return x + (t @ b["out_w"].T + b["out_b"])

    def swiglu(self, x, alpha=1.702):
        x_glu, x_linear = x[..., ::2], x[..., 1::2]
        x_glu = x_glu.clamp(min=None, max=self.limit)
        x_linear = x_linear.clamp(min=-self.limit, max=self.limit)
        return x_glu * torch.sigmoid(alpha * x_glu) * (x_linear + 1)

    def mlp_block(self, b, x):
        t = self.rmsnorm(x, b["mlp_norm"])
        g = t @ b["gate_w"].T + b["gate_b"]
        experts = torch.topk(g, k=self.k, dim=-1, sorted=True)
        expert_weights = torch.softmax(experts.values, dim=1)
        idx = experts.indices
        t1 = torch.einsum("beck,bk->bec", b["mlp1_w"][idx], t) + b["mlp1_b"][idx]
        t1 = self.swiglu(t1)
        t2 = torch.einsum("beck,bek->bec", b["mlp2_w"][idx], t1) + b["mlp2_b"][idx]
        return x + torch.einsum("bec,be->bc", t2, expert_weights)

    def forward(self, ids):
        x = self.embedding[torch.tensor(ids, dtype=torch.long)]
        for b in self.blocks:
            x = self.mlp_block(b, self.attn_block(b, x))
        return (self.rmsnorm(x, self.norm) @ self.unembedding.T).numpy()


# ----------------------------------------------------------------------------------------------


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


class Fixture:
    root = None
    P = None


def setUpModule():
    Fixture.root = tempfile.mkdtemp(prefix="tern_gpt_oss_ref_")
    Fixture.P = make_params(SMALL_CONFIG, seed=1234)
    Fixture.mx = write_model(Fixture.root, "mxfp4", SMALL_CONFIG, Fixture.P, "mxfp4")
    Fixture.fl = write_model(Fixture.root, "float", SMALL_CONFIG, Fixture.P, "float")
    Fixture.sharded = write_model(Fixture.root, "sharded", SMALL_CONFIG, Fixture.P, "mxfp4", shards=3)
    Fixture.models = {}


def tearDownModule():
    if Fixture.root:
        shutil.rmtree(Fixture.root, ignore_errors=True)


def model(path):
    if path not in Fixture.models:
        Fixture.models[path] = R.load_model(path)
    return Fixture.models[path]


def variant(name, cfg_changes=None, param_changes=None, layout="mxfp4"):
    cfg = json.loads(json.dumps(SMALL_CONFIG))
    cfg.update(cfg_changes or {})
    P = dict(Fixture.P)
    P.update(param_changes or {})
    return write_model(Fixture.root, name, cfg, P, layout), cfg, P


needs_torch = unittest.skipIf(torch is None, "torch (python3-torch) is not installed")


class MXFP4Layout(unittest.TestCase):
    def test_hand_block(self):
        # byte b: low nibble = element 2b, high nibble = element 2b + 1; value = FP4 * 2^(scale - 127)
        blocks = np.zeros((1, 16), np.uint8)
        blocks[0, 0] = 0x21   # e0 = code 1 (+0.5), e1 = code 2 (+1.0)
        blocks[0, 1] = 0xF7   # e2 = code 7 (+6.0), e3 = code 15 (-6.0)
        blocks[0, 15] = 0x9C  # e30 = code 12 (-2.0), e31 = code 9 (-0.5)
        v = R.dequantize_mxfp4(blocks, np.array([129], np.uint8))  # scale 2^2
        want = np.zeros(32)
        want[[0, 1, 2, 3, 30, 31]] = [2.0, 4.0, 24.0, -24.0, -8.0, -2.0]
        self.assertEqual(v.shape, (32,))  # [G, 16] -> [G * 32]
        np.testing.assert_array_equal(v, want)
        self.assertEqual(R.dequantize_mxfp4(blocks, np.array([127], np.uint8))[1], 1.0)
        self.assertEqual(R.dequantize_mxfp4(blocks, np.array([0], np.uint8))[1], 2.0 ** -127)

    def test_dequantized_equals_float_source(self):
        P = Fixture.P
        for L in range(SMALL_CONFIG["num_hidden_layers"]):
            for key in ("#mlp1.%d" % L, "#mlp2.%d" % L):
                got = R.dequantize_mxfp4(P[key + ".blocks"], P[key + ".scales"])
                np.testing.assert_array_equal(got, P[key])
        mx, fl = model(Fixture.mx), model(Fixture.fl)
        self.assertEqual(mx.expert_layout, "mxfp4")
        self.assertEqual(fl.expert_layout, "float")
        for L in range(SMALL_CONFIG["num_hidden_layers"]):
            for a, b in zip(mx.experts(L), fl.experts(L)):
                np.testing.assert_array_equal(a, b)
            # HF float layout: gate_up_proj[e, h, 2j] = gate unit j, [e, h, 2j + 1] = up unit j
            gu = fl.experts(L)[0]
            np.testing.assert_array_equal(gu[:, :, 0::2], P["#mlp1.%d" % L][:, 0::2, :].transpose(0, 2, 1))

    def test_ggml_block_mapping(self):
        # HF/OpenAI blocks -> ggml block_mxfp4 bytes, decoded by the independent ggml implementation
        P = Fixture.P
        for key in ("#mlp1.0", "#mlp2.3"):
            blocks, scales = P[key + ".blocks"], P[key + ".scales"]
            g = R.mxfp4_to_ggml_blocks(blocks, scales)
            self.assertEqual(g.shape, blocks.shape[:-1] + (17,))
            np.testing.assert_array_equal(g[..., 0], scales)  # scale byte copied unchanged
            rows = g.reshape(-1, g.shape[-2] * 17)
            want = R.dequantize_mxfp4(blocks, scales).reshape(rows.shape[0], -1)
            for r in range(rows.shape[0]):
                got = GQ.dequantize("mxfp4", rows[r].tobytes(), want.shape[1]).astype(np.float64)
                np.testing.assert_array_equal(got, want[r])
        # ggml byte j: low nibble = element j, high nibble = element j + 16
        blocks = np.zeros((1, 16), np.uint8)
        blocks[0, 0] = 0x21   # e0 = 1, e1 = 2
        blocks[0, 8] = 0x43   # e16 = 3, e17 = 4
        g = R.mxfp4_to_ggml_blocks(blocks, np.array([127], np.uint8))
        self.assertEqual(int(g[0, 1]), 0x31)  # qs[0] = e0 | e16 << 4
        self.assertEqual(int(g[0, 2]), 0x42)  # qs[1] = e1 | e17 << 4

    def test_layouts_give_identical_logits(self):
        a = model(Fixture.mx).forward(PROMPT)
        b = model(Fixture.fl).forward(PROMPT)
        np.testing.assert_array_equal(a, b)

    def test_sharded_index_loads(self):
        np.testing.assert_array_equal(model(Fixture.sharded).forward(PROMPT), model(Fixture.mx).forward(PROMPT))

    def test_wrong_shapes_and_mixed_layouts_are_errors(self):
        d, _, _ = variant("bad_blocks_shape", {"intermediate_size": 96})
        with self.assertRaises(ValueError):
            R.load_model(d)
        # one layer MXFP4, the others float
        d = write_model(Fixture.root, "mixed", SMALL_CONFIG, Fixture.P, "float")
        t = checkpoint_tensors(SMALL_CONFIG, Fixture.P, "float")
        mxt = checkpoint_tensors(SMALL_CONFIG, Fixture.P, "mxfp4")
        x = "model.layers.0.mlp.experts."
        del t[x + "gate_up_proj"], t[x + "down_proj"]
        for n in ("gate_up_proj_blocks", "gate_up_proj_scales", "down_proj_blocks", "down_proj_scales"):
            t[x + n] = mxt[x + n]
        write_safetensors(os.path.join(d, "model.safetensors"), t)
        with self.assertRaises(ValueError):
            R.load_model(d)


@needs_torch
class AgainstTorch(unittest.TestCase):
    def check(self, path, cfg, P, layout, ids=PROMPT):
        ref = R.load_model(path).forward(ids)
        tor = TorchGptOss(cfg, P, layout).forward(ids)
        self.assertEqual(ref.shape, (len(ids), cfg["vocab_size"]))
        e = rel_err(ref, tor)
        self.assertLess(e, REL_TOL, "reference vs torch: relative error %.3g" % e)
        return ref, tor

    def test_mxfp4_layout(self):
        self.check(Fixture.mx, SMALL_CONFIG, Fixture.P, "mxfp4")

    def test_float_layout(self):
        self.check(Fixture.fl, SMALL_CONFIG, Fixture.P, "float")

    def test_plain_rope(self):
        d, cfg, P = variant("plain_rope", {"rope_scaling": None})
        self.check(d, cfg, P, "mxfp4")

    def test_sinks_are_used(self):
        # sinks of -1e4 contribute exp(-1e4) = 0: plain softmax.  The logits must change, and the
        # torch implementation must follow in both cases (a reference ignoring sinks fails here).
        P = Fixture.P
        changes = {}
        for L in range(SMALL_CONFIG["num_hidden_layers"]):
            n = "model.layers.%d.self_attn.sinks" % L
            changes[n] = ("BF16", np.full_like(P[n][1], -1e4))
        d, cfg, P2 = variant("no_sinks", param_changes=changes)
        with_sinks, _ = self.check(Fixture.mx, SMALL_CONFIG, Fixture.P, "mxfp4")
        without, _ = self.check(d, cfg, P2, "mxfp4")
        self.assertGreater(rel_err(with_sinks, without), 1e-3)

    def test_sliding_window_matters(self):
        d, cfg, P = variant("all_full", {"layer_types": ["full_attention"] * 4})
        sliding, _ = self.check(Fixture.mx, SMALL_CONFIG, Fixture.P, "mxfp4")
        full, _ = self.check(d, cfg, P, "mxfp4")
        W = SMALL_CONFIG["sliding_window"]
        # positions 0..W-1 see at most W keys (i - j <= W - 1 < W): identical
        np.testing.assert_array_equal(sliding[:W], full[:W])
        # position W loses key 0 on sliding layers (W - 0 = W, not < W): every later row differs
        for i in range(W, len(PROMPT)):
            self.assertGreater(np.max(np.abs(sliding[i] - full[i])), 1e-6, "position %d" % i)

    def test_window_one_and_long_window(self):
        d, cfg, P = variant("window1", {"sliding_window": 1})
        self.check(d, cfg, P, "float")
        d, cfg, P = variant("window_long", {"sliding_window": 64})
        ref, _ = self.check(d, cfg, P, "float")
        full = R.load_model(variant("all_full2", {"layer_types": ["full_attention"] * 4})[0]).forward(PROMPT)
        np.testing.assert_array_equal(ref, full)  # window longer than the prompt = full attention

    def test_swiglu_clamps_are_exercised(self):
        # the comparison above only proves the clamps if pre-activations exceed the limit
        m = model(Fixture.mx)
        out = m.forward(PROMPT, return_hidden_states=True, return_routing=True)
        c = m.config
        over_gate = over_up = 0
        # the MoE inputs of each layer, recomputed through the public pieces
        ids = PROMPT
        x = m.w("model.embed_tokens.weight")[np.asarray(ids)]
        inv, af = R.rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings)
        for L in range(c.num_hidden_layers):
            p = "model.layers.%d." % L
            x = x + m.attention(L, R.rms_norm(x, m.w(p + "input_layernorm.weight"), c.rms_norm_eps), np.arange(len(ids)), inv, af)
            h = R.rms_norm(x, m.w(p + "post_attention_layernorm.weight"), c.rms_norm_eps)
            gu_w, _ = m.experts(L)
            experts = out.routing[L]["experts"]
            for t in range(len(ids)):
                for e in experts[t]:
                    gu = h[t] @ gu_w[e] + m.w(p + "mlp.experts.gate_up_proj_bias")[e]
                    over_gate += int(np.sum(gu[0::2] > c.swiglu_limit))
                    over_up += int(np.sum(np.abs(gu[1::2]) > c.swiglu_limit))
            x = x + m.moe(L, h)[0]
        np.testing.assert_allclose(x, out.hidden_states[-1], rtol=0, atol=1e-12)
        self.assertGreater(over_gate, 0)
        self.assertGreater(over_up, 0)


class Pieces(unittest.TestCase):
    def test_attention_mask_boundary(self):
        a = R.attention_allowed(8, 3)
        for i in range(8):
            for j in range(8):
                self.assertEqual(bool(a[i, j]), j <= i and i - j < 3, (i, j))
        self.assertEqual(int(a[7].sum()), 3)  # W keys including itself
        self.assertTrue(np.array_equal(R.attention_allowed(5, None), np.tril(np.ones((5, 5), bool))))
        # decode step at absolute position 9 with window 4 sees keys 6, 7, 8, 9
        self.assertEqual(list(np.nonzero(R.attention_allowed(1, 4, offset=9)[0])[0]), [6, 7, 8, 9])

    def test_sink_softmax(self):
        rng = np.random.default_rng(3)
        s = rng.standard_normal((2, 3, 3))
        s[:, 0, 1:] = -np.inf
        s[:, 1, 2] = -np.inf
        sinks = np.array([0.7, -2.0])
        p = R.sink_softmax(s, sinks)
        for h in range(2):
            for i in range(3):
                den = sum(math.exp(v) for v in s[h, i] if v != -np.inf) + math.exp(sinks[h])
                for j in range(3):
                    want = 0.0 if s[h, i, j] == -np.inf else math.exp(s[h, i, j]) / den
                    self.assertAlmostEqual(p[h, i, j], want, places=14)
                self.assertLess(p[h, i].sum(), 1.0)

    def test_route_topk_then_softmax(self):
        logits = np.array([[1.0, 3.0, 2.0, 0.0, 2.0]])
        experts, weights = R.route(logits, 3)
        self.assertEqual(experts.tolist(), [[1, 2, 4]])  # tie 2.0: lower index first
        z = np.exp([3.0, 2.0, 2.0])
        np.testing.assert_allclose(weights[0], z / z.sum(), rtol=1e-15)

    def test_clamped_swiglu(self):
        lim, a = 7.0, 1.702
        gu = np.array([10.0, 9.0, -3.0, -12.0, 2.0, 0.5])  # (gate, up) pairs
        got = R.clamped_swiglu(gu, lim, a)

        def glu(g):
            return g / (1.0 + math.exp(-a * g))

        want = [glu(7.0) * (7.0 + 1), glu(-3.0) * (-7.0 + 1), glu(2.0) * (0.5 + 1)]
        np.testing.assert_allclose(got, want, rtol=1e-14)

    def test_rope_half_split(self):
        x = np.arange(8, dtype=np.float64).reshape(1, 1, 8) + 1
        inv = np.array([1.0, 0.5, 0.25, 0.125])
        y = R.apply_rope(x, np.array([3]), inv, 1.5)
        for i in range(4):
            ang = 3 * inv[i]
            a, b = x[0, 0, i], x[0, 0, i + 4]
            self.assertAlmostEqual(y[0, 0, i], 1.5 * (a * math.cos(ang) - b * math.sin(ang)), places=13)
            self.assertAlmostEqual(y[0, 0, i + 4], 1.5 * (b * math.cos(ang) + a * math.sin(ang)), places=13)


class Yarn(unittest.TestCase):
    def test_release_values_hand_computed(self):
        c = R.Config.from_dict(GPT_OSS_20B_CONFIG)
        p = R.yarn_parameters(c.head_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings)
        d, base = 64, 150000.0
        low = d * math.log(4096 / (32 * 2 * math.pi)) / (2 * math.log(base))   # 8.0928 (truncate false)
        high = d * math.log(4096 / (1 * 2 * math.pi)) / (2 * math.log(base))   # 17.3980
        self.assertAlmostEqual(low, 8.092779115512402, places=12)
        self.assertAlmostEqual(high, 17.39802450158856, places=12)
        self.assertEqual(p["low"], low)
        self.assertEqual(p["high"], high)
        self.assertEqual(p["attention_factor"], 0.1 * math.log(32) + 1)   # 1.3465735902799727
        self.assertAlmostEqual(p["attention_factor"], 1.3465735902799727, places=15)
        inv = p["inv_freq"]
        for i in range(32):
            f = base ** (-2 * i / d)
            ramp = min(max((i - low) / (high - low), 0.0), 1.0)   # 0: extrapolate, 1: interpolate
            self.assertAlmostEqual(inv[i] / (f / 32 * ramp + f * (1 - ramp)), 1.0, places=13, msg=str(i))
        self.assertEqual(inv[0], 1.0)
        self.assertAlmostEqual(inv[8] / base ** (-16 / 64), 1.0, places=14)      # i <= 8: unscaled
        self.assertAlmostEqual(inv[18] / (base ** (-36 / 64) / 32), 1.0, places=14)  # i >= 18: / 32

    def test_truncate_true_rounds_bounds(self):
        s = dict(GPT_OSS_20B_CONFIG["rope_scaling"], truncate=True)
        p = R.yarn_parameters(64, 150000.0, s, 131072)
        self.assertEqual((p["low"], p["high"]), (8, 18))
        s.pop("truncate")  # absent means True in transformers
        self.assertEqual(R.yarn_parameters(64, 150000.0, s, 131072)["low"], 8)

    def test_inconsistent_factor_refused(self):
        s = dict(GPT_OSS_20B_CONFIG["rope_scaling"])
        with self.assertRaises(ValueError):
            R.yarn_parameters(64, 150000.0, s, 65536)  # 65536 / 4096 = 16 != 32

    def test_release_config_parses(self):
        c = R.Config.from_dict(GPT_OSS_20B_CONFIG)
        self.assertEqual((c.num_hidden_layers, c.num_local_experts, c.num_experts_per_tok), (24, 32, 4))
        self.assertEqual((c.head_dim, c.num_attention_heads, c.num_key_value_heads), (64, 64, 8))
        self.assertEqual((c.sliding_window, c.window_of(0), c.window_of(1)), (128, 128, None))
        self.assertEqual((c.swiglu_limit, c.swiglu_alpha, c.rms_norm_eps), (7.0, 1.702, 1e-5))
        cfg = dict(GPT_OSS_20B_CONFIG, num_hidden_layers=36, num_local_experts=128)
        del cfg["layer_types"]  # GptOssConfig default: sliding on even layers
        c = R.Config.from_dict(cfg)
        self.assertEqual(c.layer_types[:3], ["sliding_attention", "full_attention", "sliding_attention"])
        self.assertEqual(len(c.layer_types), 36)
        with self.assertRaises(ValueError):
            R.Config.from_dict(dict(GPT_OSS_20B_CONFIG, model_type="qwen3_moe"))


class Cli(unittest.TestCase):
    def test_json(self):
        r = subprocess.run([sys.executable, REFERENCE_SCRIPT, Fixture.fl, "--tokens", ",".join(map(str, PROMPT[:5])),
                            "--json", "--routing", "--greedy", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        want = model(Fixture.fl).forward(PROMPT[:5])
        np.testing.assert_array_equal(np.array(doc["logits"]), want)
        self.assertEqual(len(doc["greedy"]), 2)
        self.assertEqual(len(doc["routing"]), SMALL_CONFIG["num_hidden_layers"])
        self.assertEqual(np.array(doc["routing"][0]["experts"]).shape, (5, 2))


if __name__ == "__main__":
    unittest.main()
