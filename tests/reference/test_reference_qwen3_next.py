"""Checks of the independent float64 qwen3_next reference (tools/reference/qwen3_next.py).

Tiny random qwen3_next checkpoints written here (the writer and temp-dir helper come from
test_reference_deepseek_v3.py) are run through the reference and through a per-token loop
implementation written separately from the transformers facts (zero-centred RMSNorm, gated
full attention with partial RoPE, Gated DeltaNet with a rolling conv state and a per-token
recurrent state, RMSNormGated, softmax top-k MoE with a gated shared expert).  The chunked and
the recurrent delta rule are checked against each other on prompts spanning several chunks.
No tern binary, no torch needed.

    cd tests/reference && /usr/bin/python3 -m unittest -v test_reference_qwen3_next
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
import qwen3_next as R  # noqa: E402  (the reference under test)

REFERENCE_SCRIPT = os.path.join(REFERENCE_DIR, "qwen3_next.py")

# every dimension distinct where possible, so that a transposed reshape cannot pass by accident
TINY = {
    "model_type": "qwen3_next", "vocab_size": 41, "hidden_size": 16, "intermediate_size": 22, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12, "partial_rotary_factor": 0.5,
    "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "linear_conv_kernel_dim": 3,
    "linear_key_head_dim": 6, "linear_value_head_dim": 5, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "decoder_sparse_step": 1, "moe_intermediate_size": 7, "shared_expert_intermediate_size": 9,
    "num_experts_per_tok": 3, "num_experts": 8, "norm_topk_prob": True, "mlp_only_layers": [2],
    "full_attention_interval": 2,
}
IDS = [4, 40, 13, 13, 0, 27, 9, 31, 2, 18, 7, 35, 22]  # 13 tokens: chunks of 4 and 5 leave a partial last one


def tiny(**overrides):
    c = copy.deepcopy(TINY)
    c.update(overrides)
    return c


def layer_types(c):
    if c.get("layer_types") is not None:
        return list(c["layer_types"])
    n = c.get("full_attention_interval", 4)
    return ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(c["num_hidden_layers"])]


def is_moe(c, L):
    return L not in c.get("mlp_only_layers", []) and c["num_experts"] > 0 and (L + 1) % c["decoder_sparse_step"] == 0


def shapes(c):
    H, nh, nkv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                      c["linear_value_head_dim"])
    s = {"model.embed_tokens.weight": (c["vocab_size"], H), "model.norm.weight": (H,)}
    if not c.get("tie_word_embeddings"):
        s["lm_head.weight"] = (c["vocab_size"], H)
    for L, kind in enumerate(layer_types(c)):
        p = "model.layers.%d." % L
        s[p + "input_layernorm.weight"] = (H,)
        s[p + "post_attention_layernorm.weight"] = (H,)
        if kind == "full_attention":
            a = p + "self_attn."
            for n, rows in (("q", 2 * nh), ("k", nkv), ("v", nkv)):
                s[a + n + "_proj.weight"] = (rows * hd, H)
                if c.get("attention_bias"):
                    s[a + n + "_proj.bias"] = (rows * hd,)
            s[a + "o_proj.weight"] = (H, nh * hd)
            if c.get("attention_bias"):
                s[a + "o_proj.bias"] = (H,)
            s[a + "q_norm.weight"] = (hd,)
            s[a + "k_norm.weight"] = (hd,)
        else:
            a = p + "linear_attn."
            s[a + "in_proj_qkvz.weight"] = (2 * nk * dk + 2 * nv * dv, H)
            s[a + "in_proj_ba.weight"] = (2 * nv, H)
            s[a + "conv1d.weight"] = (2 * nk * dk + nv * dv, 1, c["linear_conv_kernel_dim"])
            s[a + "dt_bias"] = (nv,)
            s[a + "A_log"] = (nv,)
            s[a + "norm.weight"] = (dv,)
            s[a + "out_proj.weight"] = (H, nv * dv)
        if is_moe(c, L):
            s[p + "mlp.gate.weight"] = (c["num_experts"], H)
            s[p + "mlp.shared_expert_gate.weight"] = (1, H)
            mlps = [("mlp.experts.%d." % e, c["moe_intermediate_size"]) for e in range(c["num_experts"])]
            mlps.append(("mlp.shared_expert.", c["shared_expert_intermediate_size"]))
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
    for name, shape in shapes(c).items():
        if name.endswith("linear_attn.norm.weight"):  # RMSNormGated: plain weight around 1
            t = 1.0 + 0.3 * rng.standard_normal(shape)
        elif name.endswith("norm.weight"):  # zero-centred: the effective weight is 1 + w
            t = 0.3 * rng.standard_normal(shape)
        elif name.endswith("A_log") or name.endswith("dt_bias") or name.endswith(".bias"):
            t = 0.5 * rng.standard_normal(shape)
        elif name.endswith("conv1d.weight"):
            t = rng.standard_normal(shape) / math.sqrt(shape[-1])
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


def rel_err(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


# ----------------------------------------------------------------------------------------------
# per-token loop implementation, written from the facts independently of the vectorised reference


def loop_forward(model_dir, ids):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    W = R.TensorStore(model_dir).get
    nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    rd = int(hd * c["partial_rotary_factor"])
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                      c["linear_value_head_dim"])
    K, eps, theta, bias = c["linear_conv_kernel_dim"], c["rms_norm_eps"], c["rope_theta"], c.get("attention_bias")
    types = layer_types(c)

    def sig(z):
        return 1.0 / (1.0 + math.exp(-z))

    def silu(vec):
        return np.array([t * sig(t) for t in vec])

    def rms(vec, w):  # w is the effective weight
        return np.array([vec[i] / math.sqrt(sum(t * t for t in vec) / len(vec) + eps) * w[i] for i in range(len(vec))])

    def rope(vec, pos):  # pairs (i, i + rd/2) of the first rd dims
        out = vec.copy()
        for i in range(rd // 2):
            ang = pos * theta ** (-(2 * i) / rd)
            x0, x1 = vec[i], vec[i + rd // 2]
            out[i], out[i + rd // 2] = x0 * math.cos(ang) - x1 * math.sin(ang), x1 * math.cos(ang) + x0 * math.sin(ang)
        return out

    def lin(name, vec, with_bias=False):
        return W(name + ".weight") @ vec + (W(name + ".bias") if with_bias else 0.0)

    def mlp(h, p):
        return lin(p + "down_proj", silu(lin(p + "gate_proj", h)) * lin(p + "up_proj", h))

    def unit(vec):
        return vec / math.sqrt(float(np.dot(vec, vec)) + 1e-6)

    emb = W("model.embed_tokens.weight")
    xs = [emb[t].copy() for t in ids]
    for L in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % L
        hs = [rms(x, 1.0 + W(p + "input_layernorm.weight")) for x in xs]
        outs = []
        if types[L] == "full_attention":
            a = p + "self_attn."
            Q, G, Ks, Vs = [], [], [], []
            for t, h in enumerate(hs):
                qp, kp, vp = lin(a + "q_proj", h, bias), lin(a + "k_proj", h, bias), lin(a + "v_proj", h, bias)
                qn = 1.0 + W(a + "q_norm.weight")
                Q.append([rope(rms(qp[2 * j * hd:2 * j * hd + hd], qn), t) for j in range(nh)])
                G.append(np.concatenate([qp[2 * j * hd + hd:2 * (j + 1) * hd] for j in range(nh)]))
                Ks.append([rope(rms(kp[j * hd:(j + 1) * hd], 1.0 + W(a + "k_norm.weight")), t) for j in range(nkv)])
                Vs.append([vp[j * hd:(j + 1) * hd] for j in range(nkv)])
            for t in range(len(xs)):
                heads = []
                for j in range(nh):
                    kv = j // (nh // nkv)
                    sc = [float(np.dot(Q[t][j], Ks[s][kv])) / math.sqrt(hd) for s in range(t + 1)]
                    ex = [math.exp(z - max(sc)) for z in sc]
                    heads.append(sum(ex[s] / sum(ex) * Vs[s][kv] for s in range(t + 1)))
                gated = np.concatenate(heads) * np.array([sig(z) for z in G[t]])
                outs.append(lin(a + "o_proj", gated, bias))
        else:
            a = p + "linear_attn."
            r = nv // nk
            conv_w = W(a + "conv1d.weight")[:, 0, :]
            A, dt = W(a + "A_log"), W(a + "dt_bias")
            conv_state = [np.zeros(conv_w.shape[0]) for _ in range(K - 1)]  # the last K-1 inputs
            S = [np.zeros((dk, dv)) for _ in range(nv)]
            for h in hs:
                proj, ba = lin(a + "in_proj_qkvz", h), lin(a + "in_proj_ba", h)
                width = 2 * dk + 2 * r * dv
                qh, kh, vh, zh, bh, ah = [], [], [], [], [], []
                for g in range(nk):  # key-head group g holds q, k, then r value heads of v and z, then b, a
                    blk = proj[g * width:(g + 1) * width]
                    qh.append(blk[:dk])
                    kh.append(blk[dk:2 * dk])
                    vh += [blk[2 * dk + i * dv:2 * dk + (i + 1) * dv] for i in range(r)]
                    zh += [blk[2 * dk + r * dv + i * dv:2 * dk + r * dv + (i + 1) * dv] for i in range(r)]
                    bh += list(ba[g * 2 * r:g * 2 * r + r])
                    ah += list(ba[g * 2 * r + r:(g + 1) * 2 * r])
                mixed = np.concatenate(qh + kh + vh)
                window = conv_state + [mixed]
                conv = np.array([sum(conv_w[ch, i] * window[i][ch] for i in range(K)) for ch in range(len(mixed))])
                conv_state = window[1:]
                conv = silu(conv)
                qs = [conv[i * dk:(i + 1) * dk] for i in range(nk)]
                ks = [conv[nk * dk + i * dk:nk * dk + (i + 1) * dk] for i in range(nk)]
                vs = [conv[2 * nk * dk + i * dv:2 * nk * dk + (i + 1) * dv] for i in range(nv)]
                o = []
                for j in range(nv):
                    q, k = unit(qs[j // r]) / math.sqrt(dk), unit(ks[j // r])
                    beta = sig(bh[j])
                    z = ah[j] + dt[j]
                    decay = math.exp(-math.exp(A[j]) * math.log1p(math.exp(z)))
                    S[j] = S[j] * decay
                    delta = (vs[j] - S[j].T @ k) * beta
                    S[j] = S[j] + np.outer(k, delta)
                    oj = S[j].T @ q
                    o.append(rms(oj, W(a + "norm.weight")) * silu(zh[j]))
                outs.append(lin(a + "out_proj", np.concatenate(o)))
        xs = [x + y for x, y in zip(xs, outs)]
        new = []
        for x in xs:
            h = rms(x, 1.0 + W(p + "post_attention_layernorm.weight"))
            if not is_moe(c, L):
                new.append(x + mlp(h, p + "mlp."))
                continue
            logits = W(p + "mlp.gate.weight") @ h
            ex = [math.exp(z - max(logits)) for z in logits]
            prob = [e / sum(ex) for e in ex]
            chosen = sorted(range(len(prob)), key=lambda e: (-prob[e], e))[:c["num_experts_per_tok"]]
            tot = sum(prob[e] for e in chosen) if c["norm_topk_prob"] else 1.0
            y = sum(prob[e] / tot * mlp(h, p + "mlp.experts.%d." % e) for e in chosen)
            y = y + sig(float(W(p + "mlp.shared_expert_gate.weight")[0] @ h)) * mlp(h, p + "mlp.shared_expert.")
            new.append(x + y)
        xs = new
    head = emb if c.get("tie_word_embeddings") else W("lm_head.weight")
    return np.array([head @ rms(x, 1.0 + W("model.norm.weight")) for x in xs])


# ----------------------------------------------------------------------------------------------


class TestConfig(unittest.TestCase):
    def test_defaults_and_released_shape(self):
        d = R.Config.from_dict({"model_type": "qwen3_next"})  # Qwen3NextConfig defaults
        self.assertEqual((d.hidden_size, d.num_hidden_layers, d.head_dim, d.rotary_dim, d.num_key_value_heads),
                         (2048, 48, 256, 64, 2))
        self.assertEqual((d.linear_num_key_heads, d.linear_num_value_heads, d.linear_key_head_dim,
                          d.linear_value_head_dim, d.linear_conv_kernel_dim), (16, 32, 128, 128, 4))
        self.assertEqual((d.num_experts, d.num_experts_per_tok, d.moe_intermediate_size,
                          d.shared_expert_intermediate_size, d.rms_norm_eps, d.rope_theta),
                         (512, 10, 512, 512, 1e-6, 1e4))
        self.assertTrue(d.norm_topk_prob)
        self.assertFalse(d.tie_word_embeddings or d.attention_bias)
        self.assertEqual(d.layer_types[:8], ("linear_attention",) * 3 + ("full_attention",) + ("linear_attention",) * 3
                         + ("full_attention",))
        self.assertEqual(d.layer_types.count("full_attention"), 12)
        self.assertTrue(all(d.is_moe_layer(i) for i in range(48)))
        # Qwen3-Next-80B-A3B's config.json keys
        rel = R.Config.from_dict({"model_type": "qwen3_next", "rope_theta": 10000000, "full_attention_interval": 4,
                                  "partial_rotary_factor": 0.25, "rope_scaling": None, "head_dim": 256,
                                  "num_hidden_layers": 48, "mlp_only_layers": [], "decoder_sparse_step": 1})
        self.assertEqual((rel.rope_theta, rel.rotary_dim), (1e7, 64))
        self.assertEqual(rel.layer_types, d.layer_types)
        v5 = R.Config.from_dict({"model_type": "qwen3_next", "rope_parameters": {
            "rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5}})
        self.assertEqual((v5.rope_theta, v5.rotary_dim), (1e6, 128))

    def test_layer_types_and_sparsity(self):
        c = R.Config.from_dict(tiny())
        self.assertEqual(c.layer_types, ("linear_attention", "full_attention") * 2)
        self.assertEqual([c.is_moe_layer(i) for i in range(4)], [True, True, False, True])
        c = R.Config.from_dict(tiny(decoder_sparse_step=2, mlp_only_layers=[]))
        self.assertEqual([c.is_moe_layer(i) for i in range(4)], [False, True, False, True])
        c = R.Config.from_dict(tiny(num_experts=0))
        self.assertFalse(any(c.is_moe_layer(i) for i in range(4)))
        explicit = ["full_attention", "linear_attention", "linear_attention", "full_attention"]
        self.assertEqual(R.Config.from_dict(tiny(layer_types=explicit)).layer_types, tuple(explicit))

    def test_refusals(self):
        bad = [dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}), dict(hidden_act="gelu"),
               dict(linear_num_value_heads=3), dict(head_dim=10, partial_rotary_factor=0.3),  # 3 rotary dims
               dict(layer_types=["linear_attention"] * 3), dict(layer_types=["sliding_attention"] * 4),
               dict(model_type="qwen3_moe"), dict(num_attention_heads=3),
               dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4})]
        for b in bad:
            with self.assertRaises((ValueError, NotImplementedError), msg=b):
                R.Config.from_dict(tiny(**b))
        R.Config.from_dict(tiny(rope_scaling={"rope_type": "default"}))  # accepted


class TestDeltaRule(unittest.TestCase):
    def inputs(self, T, h=3, dk=4, dv=5, seed=0):
        rng = np.random.default_rng(seed)
        q = R.l2norm(rng.standard_normal((h, T, dk))) * dk ** -0.5
        k = R.l2norm(rng.standard_normal((h, T, dk)))
        v = rng.standard_normal((h, T, dv))
        g = -np.exp(0.5 * rng.standard_normal((h, T))) * R.softplus(rng.standard_normal((h, T)))
        beta = R.sigmoid(rng.standard_normal((h, T)))
        return q, k, v, g, beta

    def test_chunked_equals_recurrent(self):
        for T in (1, 3, 4, 5, 12, 13, 31):
            args = self.inputs(T, seed=T)
            ref = R.delta_rule_recurrent(*args)
            self.assertEqual(ref.shape, (3, T, 5))
            for C in (1, 2, 4, 5, 8, 64):
                self.assertLessEqual(rel_err(R.delta_rule_chunked(*args, chunk_size=C), ref), 1e-10, (T, C))

    def test_recurrence_by_hand(self):
        # one head, dk = dv = 1: S_t = a_t S_{t-1} + k_t beta_t (v_t - a_t S_{t-1} k_t); o_t = S_t q_t
        q, k, v = np.array([[[0.5], [2.0]]]), np.array([[[1.0], [-1.0]]]), np.array([[[3.0], [1.0]]])
        g, beta = np.log(np.array([[0.5, 0.25]])), np.array([[0.2, 0.6]])
        s1 = 0.2 * 3.0
        s2 = 0.25 * s1 + (-1.0) * 0.6 * (1.0 - 0.25 * s1 * -1.0)
        want = np.array([[[s1 * 0.5], [s2 * 2.0]]])
        for out in (R.delta_rule_recurrent(q, k, v, g, beta), R.delta_rule_chunked(q, k, v, g, beta, chunk_size=64)):
            np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-15)

    def test_conv_and_l2norm(self):
        x = np.arange(1.0, 13.0).reshape(4, 3)
        w = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 2.0, 3.0]])  # [C, K]
        y = R.causal_conv1d(x, w)
        np.testing.assert_array_equal(y[:, 0], [0, 0, 1, 4])                 # oldest tap: x[t-2]
        np.testing.assert_array_equal(y[:, 1], x[:, 1])                      # newest tap: x[t]
        np.testing.assert_array_equal(y[:, 2], [9, 6 + 18, 3 + 12 + 27, 6 + 18 + 36])
        np.testing.assert_allclose(R.l2norm(np.array([3.0, 4.0])), np.array([3.0, 4.0]) / math.sqrt(25 + 1e-6),
                                   rtol=1e-15)


class TestTinyCheckpoints(Dirs, unittest.TestCase):
    VARIANTS = {
        "gqa": tiny(),                                                       # nv = 2 nk
        "nv_eq_nk": tiny(linear_num_value_heads=2, num_key_value_heads=4),   # nv = nk, MHA
        "tied_bias": tiny(tie_word_embeddings=True, attention_bias=True, norm_topk_prob=False,
                          linear_num_key_heads=1, linear_num_value_heads=3, partial_rotary_factor=1.0),
        "sparse_step": tiny(decoder_sparse_step=2, mlp_only_layers=[], linear_conv_kernel_dim=4,
                            layer_types=["linear_attention", "linear_attention", "full_attention",
                                         "linear_attention"]),
    }

    def test_matches_loop_implementation(self):
        for label, cfg in self.VARIANTS.items():
            d = self.make(label, cfg, seed=1)
            m = R.load_model(d)
            want = loop_forward(d, IDS)
            for rule in ("chunked", "recurrent"):
                self.assertLessEqual(rel_err(m.forward(IDS, delta_rule=rule), want), 1e-11, (label, rule))

    def test_chunked_equals_recurrent(self):
        d = self.make("chunks", tiny(), seed=2)
        m = R.load_model(d)
        ref = m.forward(IDS, delta_rule="recurrent")
        for C in (4, 5, 13, 64):  # 4 chunks (last partial), 3 chunks (last partial), exact, padded
            self.assertLessEqual(rel_err(m.forward(IDS, chunk_size=C), ref), 1e-10, C)
        self.assertTrue(np.all(np.isfinite(ref)))

    def test_prefix_consistency(self):
        # causal: the logits of a prefix are the first rows of the logits of the whole prompt
        d = self.make("prefix", tiny(), seed=4)
        m = R.load_model(d)
        full = m.forward(IDS, chunk_size=4)
        self.assertLessEqual(rel_err(m.forward(IDS[:6], chunk_size=4), full[:6]), 1e-12)

    def test_layer_types_explicit_vs_interval(self):
        cfg = tiny()
        t = random_tensors(cfg, 3)
        derived = R.load_model(self.make("derived", cfg, tensors=t)).forward(IDS)
        explicit = tiny(layer_types=["linear_attention", "full_attention"] * 2)
        del explicit["full_attention_interval"]
        np.testing.assert_array_equal(R.load_model(self.make("explicit", explicit, tensors=t)).forward(IDS), derived)
        # layer_types wins over full_attention_interval
        both = tiny(layer_types=["linear_attention", "full_attention"] * 2, full_attention_interval=3)
        np.testing.assert_array_equal(R.load_model(self.make("both", both, tensors=t)).forward(IDS), derived)
        # the default interval is 4: layers 0-2 linear, 3 full -> the tensors of layer 1 no longer fit
        absent = tiny()
        del absent["full_attention_interval"]
        with self.assertRaises(KeyError):
            R.load_model(self.make("absent", absent, tensors=t))

    def test_routing_and_dense_layer(self):
        d = self.make("route", tiny(), seed=5)
        m = R.load_model(d)
        out = m.forward(IDS, return_routing=True, return_hidden_states=True)
        self.assertIsNone(out.routing[2])  # mlp_only_layers = [2]
        self.assertEqual(len(out.hidden_states), 5)
        for L in (0, 1, 3):
            r = out.routing[L]
            self.assertEqual(r["experts"].shape, (len(IDS), 3))
            np.testing.assert_allclose(r["weights"].sum(1), 1.0, rtol=1e-14)
            probs = np.exp(r["router_logits"]) / np.exp(r["router_logits"]).sum(1, keepdims=True)
            for t in range(len(IDS)):
                top = sorted(range(8), key=lambda e: (-probs[t, e], e))[:3]
                self.assertEqual(list(r["experts"][t]), top)
        # the dense layer reads mlp.{gate,up,down}_proj: changing it changes the output
        t = random_tensors(tiny(), 5)
        t["model.layers.2.mlp.up_proj.weight"] = t["model.layers.2.mlp.up_proj.weight"] * 2.0
        self.assertGreater(rel_err(R.load_model(self.make("dense2", tiny(), tensors=t)).forward(IDS), out.logits), 1e-3)

    def test_tied_embeddings_ignore_lm_head(self):
        cfg = tiny(tie_word_embeddings=True)
        t = random_tensors(cfg, 6)
        base = R.load_model(self.make("tied", cfg, tensors=t)).forward(IDS)
        extra = {"lm_head.weight": np.ones((cfg["vocab_size"], cfg["hidden_size"])),
                 "mtp.fc.weight": np.ones((16, 32)), "mtp.layers.0.input_layernorm.weight": np.ones(16)}
        np.testing.assert_array_equal(R.load_model(self.make("tied_extra", cfg, tensors=t, extra=extra)).forward(IDS),
                                      base)
        h = R.load_model(self.make("tied_h", cfg, tensors=t)).forward(IDS, return_hidden_states=True).hidden_states
        m = R.load_model(self.make("tied_again", cfg, tensors=t))
        x = h[-1] / np.sqrt(np.mean(h[-1] ** 2, axis=-1, keepdims=True) + 1e-6) * (1 + m.w("model.norm.weight"))
        np.testing.assert_allclose(base, x @ m.w("model.embed_tokens.weight").T, rtol=1e-12)

    def test_bad_checkpoints(self):
        cfg = tiny()
        t = random_tensors(cfg, 7)
        missing = dict(t)
        del missing["model.layers.0.linear_attn.A_log"]
        with self.assertRaises(KeyError):
            R.load_model(self.make("missing", cfg, tensors=missing))
        wrong = dict(t, **{"model.layers.1.self_attn.q_proj.weight": np.ones((48, 16))})  # no gate half
        with self.assertRaises(ValueError):
            R.load_model(self.make("wrong", cfg, tensors=wrong))
        m = R.load_model(self.make("ok", cfg, tensors=t))
        for bad in ([], [41], [-1]):
            with self.assertRaises(ValueError):
                m.forward(bad)
        with self.assertRaises(ValueError):
            m.forward([1, 2], delta_rule="fused")

    def test_bf16_checkpoint(self):
        d = self.make("bf16", tiny(), seed=8, dtype="BF16")
        m = R.load_model(d)
        self.assertLessEqual(rel_err(m.forward(IDS[:7]), loop_forward(d, IDS[:7])), 1e-11)

    def test_cli_json(self):
        d = self.make("cli", tiny(), seed=9)
        m = R.load_model(d)
        toks = [4, 40, 13, 0, 27, 9]
        for rule in ("chunked", "recurrent"):
            r = subprocess.run([sys.executable, REFERENCE_SCRIPT, d, "--tokens", ",".join(map(str, toks)), "--json",
                                "--greedy", "3", "--delta-rule", rule, "--chunk-size", "4", "--routing"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual(doc["tokens"], toks)
            np.testing.assert_allclose(np.array(doc["logits"]), m.forward(toks, delta_rule=rule), rtol=0, atol=1e-12)
            self.assertEqual(doc["greedy"], R.greedy(m, toks, 3))
            self.assertIsNone(doc["routing"][2])
            self.assertEqual(len(doc["routing"][0]["experts"]), len(toks))
        r = subprocess.run([sys.executable, REFERENCE_SCRIPT, d, "--tokens", "1,2", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(json.loads(r.stdout)), ["greedy", "logits", "tokens"])
        self.assertEqual(json.loads(r.stdout)["greedy"], [])


if __name__ == "__main__":
    unittest.main()
