"""Checks of the independent float64 glm4_moe reference (tools/reference/glm4_moe.py).

Tiny random glm4_moe checkpoints written here (the writer and temp-dir helper come from
test_reference_deepseek_v3.py) are run through the reference and through a per-token loop
implementation written from the transformers v4.57 facts (partial rotate-half RoPE on the first
rotary_dim dims of each head, per-head q/k RMSNorm before RoPE, q/k/v biases, bias-free o_proj,
GQA, the DeepSeek-V3 router with shared experts).  No tern binary, no torch needed.

    cd tests/reference && /usr/bin/python3 -m unittest -v test_reference_glm4_moe
"""
# tern-test: release-only (checks the NumPy reference itself; runs no tern binary)

import copy
import json
import math
import os
import subprocess
import sys
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover - only on machines without numpy
    print("SKIPPED: numpy is not available to this python (%s)" % sys.executable)
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_reference_deepseek_v3 import REFERENCE_DIR, TempDirs  # noqa: E402  (writer, temp dirs)

sys.path.insert(0, REFERENCE_DIR)
import glm4_moe as R  # noqa: E402  (the reference under test)

REFERENCE_SCRIPT = os.path.join(REFERENCE_DIR, "glm4_moe.py")

TINY = {
    "model_type": "glm4_moe", "vocab_size": 53, "hidden_size": 20, "intermediate_size": 36, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12, "partial_rotary_factor": 0.5,
    "hidden_act": "silu", "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
    "rope_theta": 1000000.0, "rope_scaling": None, "attention_bias": True, "moe_intermediate_size": 10,
    "num_experts_per_tok": 3, "n_shared_experts": 1, "n_routed_experts": 8, "routed_scaling_factor": 2.5,
    "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1, "norm_topk_prob": True, "use_qk_norm": True,
    "num_nextn_predict_layers": 1,
}
IDS = [4, 50, 13, 13, 0, 27, 9]


def tiny(**overrides):
    c = copy.deepcopy(TINY)
    c.update(overrides)
    return c


def shapes(c):
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh
    s = {"model.embed_tokens.weight": (c["vocab_size"], H), "model.norm.weight": (H,)}
    if not c.get("tie_word_embeddings"):
        s["lm_head.weight"] = (c["vocab_size"], H)
    for L in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % L
        s[p + "input_layernorm.weight"] = (H,)
        s[p + "post_attention_layernorm.weight"] = (H,)
        for n, rows in (("q", nh), ("k", nkv), ("v", nkv)):
            s[p + "self_attn.%s_proj.weight" % n] = (rows * hd, H)
            if c.get("attention_bias"):
                s[p + "self_attn.%s_proj.bias" % n] = (rows * hd,)
        s[p + "self_attn.o_proj.weight"] = (H, nh * hd)
        if c.get("use_qk_norm"):
            s[p + "self_attn.q_norm.weight"] = (hd,)
            s[p + "self_attn.k_norm.weight"] = (hd,)
        if L < c["first_k_dense_replace"]:
            mlps = [("mlp.", c["intermediate_size"])]
        else:
            E = c["n_routed_experts"]
            s[p + "mlp.gate.weight"] = (E, H)
            s[p + "mlp.gate.e_score_correction_bias"] = (E,)
            mlps = [("mlp.experts.%d." % e, c["moe_intermediate_size"]) for e in range(E)]
            mlps.append(("mlp.shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"]))
        for q, width in mlps:
            s[p + q + "gate_proj.weight"] = (width, H)
            s[p + q + "up_proj.weight"] = (width, H)
            s[p + q + "down_proj.weight"] = (H, width)
    return s


def random_tensors(c, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes(c).items():
        if name.endswith("norm.weight"):
            t = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith("e_score_correction_bias") or name.endswith(".bias"):
            t = 0.3 * rng.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            t = rng.standard_normal(shape)
        else:
            scale = 2.0 if name.endswith("mlp.gate.weight") else 1.0
            t = scale * rng.standard_normal(shape) / math.sqrt(shape[1])
        out[name] = t.astype(np.float32).astype(np.float64)
    return out


class Dirs(TempDirs):
    def make(self, name, config, seed=0, dtype="F32", extra=None, tensors=None):
        t = random_tensors(config, seed) if tensors is None else tensors
        return super().make(name, config, dtype=dtype, extra=extra, tensors=t)


def loop_forward(model_dir, ids):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    W = R.TensorStore(model_dir).get
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh
    rd = int(hd * c.get("partial_rotary_factor", 0.5))
    eps, theta, bias, qkn = c["rms_norm_eps"], c["rope_theta"], c.get("attention_bias"), c.get("use_qk_norm")

    def rms(v, w):
        return np.array([v[i] / math.sqrt(sum(t * t for t in v) / len(v) + eps) * w[i] for i in range(len(v))])

    def rope(v, pos):  # pairs (i, i + rd/2) of the first rd dims
        out = v.copy()
        for i in range(rd // 2):
            a = pos * theta ** (-(2 * i) / rd)
            x0, x1 = v[i], v[i + rd // 2]
            out[i], out[i + rd // 2] = x0 * math.cos(a) - x1 * math.sin(a), x1 * math.cos(a) + x0 * math.sin(a)
        return out

    def mlp(h, p):
        g = W(p + "gate_proj.weight") @ h
        act = np.array([t / (1 + math.exp(-t)) for t in g])
        return W(p + "down_proj.weight") @ (act * (W(p + "up_proj.weight") @ h))

    emb = W("model.embed_tokens.weight")
    xs = [emb[t].copy() for t in ids]
    for L in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % L
        Q, K, V = [], [], []
        for t, x in enumerate(xs):
            h = rms(x, W(p + "input_layernorm.weight"))
            proj = {n: W(p + "self_attn.%s_proj.weight" % n) @ h + (W(p + "self_attn.%s_proj.bias" % n) if bias else 0)
                    for n in "qkv"}
            qs = [proj["q"][j * hd:(j + 1) * hd] for j in range(nh)]
            ks = [proj["k"][j * hd:(j + 1) * hd] for j in range(nkv)]
            if qkn:
                qs = [rms(q, W(p + "self_attn.q_norm.weight")) for q in qs]
                ks = [rms(k, W(p + "self_attn.k_norm.weight")) for k in ks]
            Q.append([rope(q, t) for q in qs])
            K.append([rope(k, t) for k in ks])
            V.append([proj["v"][j * hd:(j + 1) * hd] for j in range(nkv)])
        new = []
        for t in range(len(xs)):
            heads = []
            for j in range(nh):
                kv = j // (nh // nkv)
                sc = [float(np.dot(Q[t][j], K[s][kv])) / math.sqrt(hd) for s in range(t + 1)]
                ex = [math.exp(z - max(sc)) for z in sc]
                heads.append(sum(ex[s] / sum(ex) * V[s][kv] for s in range(t + 1)))
            new.append(xs[t] + W(p + "self_attn.o_proj.weight") @ np.concatenate(heads))
        xs = new
        new = []
        for x in xs:
            h = rms(x, W(p + "post_attention_layernorm.weight"))
            if L < c["first_k_dense_replace"]:
                new.append(x + mlp(h, p + "mlp."))
                continue
            E, G = c["n_routed_experts"], c["n_group"]
            per = E // G
            sig = [1 / (1 + math.exp(-z)) for z in W(p + "mlp.gate.weight") @ h]
            ch = [sig[e] + W(p + "mlp.gate.e_score_correction_bias")[e] for e in range(E)]
            gs = [sum(sorted(ch[g * per:(g + 1) * per])[-2:]) for g in range(G)]
            keep = sorted(range(G), key=lambda g: (-gs[g], g))[:c["topk_group"]]
            masked = [ch[e] if e // per in keep else 0.0 for e in range(E)]
            chosen = sorted(range(E), key=lambda e: (-masked[e], e))[:c["num_experts_per_tok"]]
            tot = sum(sig[e] for e in chosen) + 1e-20 if c["norm_topk_prob"] else 1.0
            y = sum(sig[e] / tot * c["routed_scaling_factor"] * mlp(h, p + "mlp.experts.%d." % e) for e in chosen)
            new.append(x + y + mlp(h, p + "mlp.shared_experts."))
        xs = new
    head = emb if c.get("tie_word_embeddings") else W("lm_head.weight")
    return np.array([head @ rms(x, W("model.norm.weight")) for x in xs])


class TestGlm4Moe(Dirs, unittest.TestCase):
    def test_config(self):
        # GLM-4.5's shape keys: head_dim 128 with partial_rotary_factor 0.5 -> 64 rotary dims; 3 dense layers
        c = R.Config.from_dict({"model_type": "glm4_moe", "hidden_size": 5120, "num_attention_heads": 96,
                                "num_key_value_heads": 8, "head_dim": 128, "partial_rotary_factor": 0.5,
                                "n_routed_experts": 160, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 3,
                                "num_hidden_layers": 92, "use_qk_norm": True, "attention_bias": True})
        self.assertEqual((c.head_dim, c.rotary_dim), (128, 64))
        self.assertEqual([c.is_moe_layer(i) for i in (0, 2, 3)], [False, False, True])
        d = R.Config.from_dict({"model_type": "glm4_moe", "head_dim": 128})  # otherwise v4.57 defaults
        self.assertEqual((d.rotary_dim, d.rms_norm_eps, d.routed_scaling_factor, d.n_group, d.first_k_dense_replace),
                         (64, 1e-5, 1.0, 1, 1))
        self.assertFalse(d.use_qk_norm)
        self.assertFalse(d.attention_bias)
        with self.assertRaises(ValueError):  # the bare defaults: 4096 / 96 = 42, 21 rotary dims
            R.Config.from_dict({"model_type": "glm4_moe"})
        with self.assertRaises(ValueError):
            R.Config.from_dict({"model_type": "glm4_moe", "hidden_size": 4096, "num_attention_heads": 96,
                                "head_dim": 12, "partial_rotary_factor": 0.25})  # 3 rotary dims: odd
        v5 = R.Config.from_dict({"model_type": "glm4_moe", "head_dim": 16, "rope_parameters": {
            "rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25}})
        self.assertEqual((v5.rope_theta, v5.rotary_dim), (1e6, 4))

    def test_partial_rope(self):
        inv, _ = R.rope_parameters(4, 1e4)
        cos, sin = R.rope_cos_sin(np.array([3]), inv)
        x = np.random.default_rng(0).normal(size=(1, 2, 10))
        y = R.apply_partial_rope(x, cos, sin)
        np.testing.assert_array_equal(y[..., 4:], x[..., 4:])
        for i in range(2):
            a = 3 * inv[i]
            np.testing.assert_allclose(y[0, :, i], x[0, :, i] * math.cos(a) - x[0, :, i + 2] * math.sin(a), rtol=1e-14)

    def test_matches_loop_implementation(self):
        for label, cfg in (("full", tiny()), ("plain", tiny(attention_bias=False, use_qk_norm=False, head_dim=None,
                                                            num_attention_heads=2, num_key_value_heads=2,
                                                            partial_rotary_factor=1.0)),
                           ("tied", tiny(tie_word_embeddings=True, n_group=1, topk_group=1))):
            d = self.make(label, cfg, seed=1)
            np.testing.assert_allclose(R.load_model(d).forward(IDS), loop_forward(d, IDS), rtol=0, atol=1e-11,
                                       err_msg=label)

    def test_o_proj_bias_is_not_read_and_mtp_ignored(self):
        cfg = tiny()
        t = random_tensors(cfg, 2)
        base = R.load_model(self.make("base", cfg, tensors=t)).forward(IDS)
        H = cfg["hidden_size"]
        extra = {"model.layers.0.self_attn.o_proj.bias": np.full(H, 5.0),
                 "model.layers.3.eh_proj.weight": np.ones((H, 2 * H)),
                 "model.layers.3.self_attn.q_proj.weight": np.ones((7, 3))}
        m = R.load_model(self.make("extra", cfg, tensors=t, extra=extra))
        np.testing.assert_array_equal(m.forward(IDS), base)

    def test_routing_and_cli(self):
        d = self.make("cli", tiny(), seed=3)
        m = R.load_model(d)
        out = m.forward(IDS, return_routing=True, return_hidden_states=True)
        self.assertIsNone(out.routing[0])
        quirk = 0
        for L, r in enumerate(out.routing[1:], 1):
            self.assertEqual(r["experts"].shape, (len(IDS), 3))
            biased = 1 / (1 + np.exp(-r["router_logits"])) + m.w("model.layers.%d.mlp.gate.e_score_correction_bias" % L)
            for t, row in enumerate(r["experts"]):
                g = int(np.argmax(np.sort(biased[t].reshape(2, 4), axis=1)[:, -2:].sum(1)))  # the kept group
                outside = [e for e in row if e // 4 != g]
                # an expert of the dropped group is chosen only through the masked-to-0.0 quirk: it then
                # outranks kept experts whose biased score is negative (lowest index first)
                positive = int(np.sum(biased[t, 4 * g:4 * g + 4] > 0))
                self.assertEqual(len(outside), max(0, 3 - positive), (L, t, row))
                self.assertEqual(outside, [e for e in range(8) if e // 4 != g][:len(outside)])
                quirk += len(outside)
            np.testing.assert_allclose(r["weights"].sum(1), 2.5, rtol=1e-12)
        self.assertGreater(quirk, 0)  # this seed exercises it
        self.assertEqual(len(out.hidden_states), 4)
        r = subprocess.run([sys.executable, REFERENCE_SCRIPT, d, "--tokens", "4,50,13", "--json", "--routing",
                            "--greedy", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        np.testing.assert_allclose(np.array(doc["logits"]), m.forward([4, 50, 13]), rtol=0, atol=1e-12)
        self.assertEqual(doc["greedy"], R.greedy(m, [4, 50, 13], 2))
        self.assertIsNone(doc["routing"][0])


if __name__ == "__main__":
    unittest.main()
