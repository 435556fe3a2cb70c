"""Checks of the independent float64 Gemma 4 reference (tools/reference/gemma4.py).

Tiny random gemma4 / gemma4_text checkpoints written here (the writer and temp-dir helper come from
test_reference_deepseek_v3.py) are run through the reference and through a per-token loop
implementation written from the transformers facts (modeling_gemma4.py, the proportional RoPE of
modeling_rope_utils.py): incremental decoding with a growing key/value list per layer, explicit
pair rotation, scalar RMSNorm, the router and experts written out per token.  Also the released
gemma-4-26B-A4B text config's derived shapes, the defaults, the embedding scale's rounding and the
refusals.  No tern binary, no torch needed.

    cd tests/reference && /usr/bin/python3 -m unittest -v test_reference_gemma4
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
import gemma4 as R  # noqa: E402  (the reference under test)

REFERENCE_SCRIPT = os.path.join(REFERENCE_DIR, "gemma4.py")

# The text_config of google/gemma-4-26B-A4B as released (the values several independent
# implementations quote; docs/gemma4_facts.md).
RELEASE_TEXT = {
    "model_type": "gemma4_text", "hidden_size": 2816, "num_hidden_layers": 30, "intermediate_size": 2112,
    "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256,
    "global_head_dim": 512, "vocab_size": 262144, "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
    "sliding_window": 1024, "final_logit_softcapping": 30.0, "use_double_wide_mlp": False,
    "num_kv_shared_layers": 0, "hidden_size_per_layer_input": 0, "attention_k_eq_v": True,
    "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
    "tie_word_embeddings": True, "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
    "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                           "rope_type": "proportional"},
                        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
    "dtype": "bfloat16",
}

# Every dimension distinct; head_dim 6 on sliding layers, 10 on full ones, a window of 3.
TINY_TEXT = {
    "model_type": "gemma4_text", "vocab_size": 47, "hidden_size": 16, "intermediate_size": 22,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "num_global_key_value_heads": 1,
    "head_dim": 6, "global_head_dim": 10, "attention_k_eq_v": True, "rms_norm_eps": 1e-6,
    "sliding_window": 3, "final_logit_softcapping": 7.0, "hidden_size_per_layer_input": 0,
    "enable_moe_block": True, "num_experts": 6, "top_k_experts": 2, "moe_intermediate_size": 9,
    "tie_word_embeddings": True, "attention_bias": False,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
    "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.5, "rope_theta": 1000.0,
                                           "rope_type": "proportional"},
                        "sliding_attention": {"rope_theta": 100.0, "rope_type": "default"}},
}
IDS = [4, 40, 13, 13, 0, 27, 9, 46]


def text(**overrides):
    c = copy.deepcopy(TINY_TEXT)
    c.update(overrides)
    return c


def multimodal(t, **top):
    c = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
         "text_config": dict(t, model_type="gemma4_text"), "vision_config": {"model_type": "gemma4_vision"}}
    c.update(top)
    return c


def layer_types(c):
    return c["layer_types"][:-1] + ["full_attention"]


def shapes(c):
    """Tensor shapes of a text config, checkpoint names under model."""
    H, nh, E, I, F = c["hidden_size"], c["num_attention_heads"], c["num_experts"], c["moe_intermediate_size"], \
        c["intermediate_size"]
    s = {"model.embed_tokens.weight": (c["vocab_size"], H), "model.norm.weight": (H,)}
    if not c.get("tie_word_embeddings", True):
        s["lm_head.weight"] = (c["vocab_size"], H)
    for L, kind in enumerate(layer_types(c)):
        p = "model.layers.%d." % L
        full = kind == "full_attention"
        D = c["global_head_dim"] if full else c["head_dim"]
        kv = c["num_global_key_value_heads"] if full and c["attention_k_eq_v"] and c.get("num_global_key_value_heads") \
            else c["num_key_value_heads"]
        names = {"q_proj": nh * D, "k_proj": kv * D, "o_proj": H}
        if not (full and c["attention_k_eq_v"]):
            names["v_proj"] = kv * D
        for n, rows in names.items():
            s[p + "self_attn.%s.weight" % n] = (rows, nh * D if n == "o_proj" else H)
            if c.get("attention_bias"):
                s[p + "self_attn.%s.bias" % n] = (rows,)
        s[p + "self_attn.q_norm.weight"] = (D,)
        s[p + "self_attn.k_norm.weight"] = (D,)
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm_1", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2",
                  "post_feedforward_layernorm"):
            s[p + n + ".weight"] = (H,)
        s.update({p + "mlp.gate_proj.weight": (F, H), p + "mlp.up_proj.weight": (F, H),
                  p + "mlp.down_proj.weight": (H, F), p + "router.proj.weight": (E, H), p + "router.scale": (H,),
                  p + "router.per_expert_scale": (E,), p + "layer_scalar": (1,),
                  p + "experts.gate_up_proj": (E, 2 * I, H), p + "experts.down_proj": (E, H, I)})
    return s


def random_tensors(c, seed, prefix="model."):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes(c).items():
        if len(shape) == 1:
            if name.endswith(".bias"):
                t = 0.3 * rng.standard_normal(shape)
            else:  # norms, router scales, layer_scalar: around 1
                t = 1.0 + 0.25 * rng.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            t = rng.standard_normal(shape)
        else:
            scale = 3.0 if name.endswith("router.proj.weight") else 1.0
            t = scale * rng.standard_normal(shape) / math.sqrt(shape[-1])
        if name.startswith("model."):
            name = prefix + name[len("model."):]
        out[name] = t.astype(np.float32).astype(np.float64)
    return out


class Dirs(TempDirs):
    def make(self, name, config, seed=0, dtype="F32", extra=None, tensors=None):
        prefix = "model.language_model." if config["model_type"] == "gemma4" else "model."
        t = random_tensors(config.get("text_config", config), seed, prefix) if tensors is None else tensors
        return super().make(name, config, dtype=dtype, extra=extra, tensors=t)


def loop_forward(model_dir, ids):
    """Token-by-token decoding from the facts: each layer keeps its keys and values as lists."""
    with open(os.path.join(model_dir, "config.json")) as f:
        top = json.load(f)
    c = top.get("text_config", top)
    prefix = "model.language_model." if top["model_type"] == "gemma4" else "model."
    store = R.TensorStore(model_dir)

    def W(name):
        return store.get(prefix + name[len("model."):] if name.startswith("model.") else name)

    H, nh, eps, E, k_top = c["hidden_size"], c["num_attention_heads"], c["rms_norm_eps"], c["num_experts"], \
        c["top_k_experts"]
    I, bias, cap = c["moe_intermediate_size"], c.get("attention_bias", False), c.get("final_logit_softcapping")
    types = layer_types(c)
    dtype = c.get("dtype") or c.get("torch_dtype") or top.get("dtype") or top.get("torch_dtype")
    scale = float(np.float32(math.sqrt(H)))
    if dtype == "bfloat16":  # keep the top 16 bits of the float32, rounding to nearest even
        b = int(np.float32(scale).view(np.uint32))
        scale = float(np.uint32(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).view(np.float32))

    def rms(v, w=None):
        r = (sum(t * t for t in v) / len(v) + eps) ** -0.5
        return np.array([v[i] * r * (1.0 if w is None else w[i]) for i in range(len(v))])

    def gelu(t):
        return 0.5 * t * (1 + math.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t * t * t)))

    def rope(v, pos, full):
        params = c["rope_parameters"]["full_attention" if full else "sliding_attention"]
        D, theta = len(v), params["rope_theta"]
        pairs = int(params.get("partial_rotary_factor", 1.0) * D // 2) \
            if params.get("rope_type") == "proportional" else D // 2
        out = v.copy()
        for i in range(pairs):  # pairs (i, i + D/2); the others have frequency 0
            a = pos * theta ** (-(2 * i) / D)
            out[i] = v[i] * math.cos(a) - v[i + D // 2] * math.sin(a)
            out[i + D // 2] = v[i + D // 2] * math.cos(a) + v[i] * math.sin(a)
        return out

    def lin(name, h):
        return W(name + ".weight") @ h + (W(name + ".bias") if bias else 0)

    caches = [([], []) for _ in types]
    emb = W("model.embed_tokens.weight")
    head = emb if c.get("tie_word_embeddings", True) else W("lm_head.weight")
    logits = []
    for pos, tok in enumerate(ids):
        x = emb[tok] * scale
        for L, kind in enumerate(types):
            p, full = "model.layers.%d." % L, kind == "full_attention"
            D = c["global_head_dim"] if full else c["head_dim"]
            kvh = c["num_global_key_value_heads"] if full and c["attention_k_eq_v"] and \
                c.get("num_global_key_value_heads") else c["num_key_value_heads"]
            h = rms(x, W(p + "input_layernorm.weight"))
            q, k = lin(p + "self_attn.q_proj", h), lin(p + "self_attn.k_proj", h)
            v = k.copy() if full and c["attention_k_eq_v"] else lin(p + "self_attn.v_proj", h)
            keys, values = caches[L]
            keys.append([rope(rms(k[j * D:(j + 1) * D], W(p + "self_attn.k_norm.weight")), pos, full)
                         for j in range(kvh)])
            values.append([rms(v[j * D:(j + 1) * D]) for j in range(kvh)])
            first = 0 if full else max(0, pos - c["sliding_window"] + 1)
            heads = []
            for j in range(nh):
                qj = rope(rms(q[j * D:(j + 1) * D], W(p + "self_attn.q_norm.weight")), pos, full)
                g = j // (nh // kvh)
                sc = [float(np.dot(qj, keys[s][g])) for s in range(first, pos + 1)]
                m = max(sc)
                ex = [math.exp(z - m) for z in sc]
                heads.append(sum(ex[i] / sum(ex) * values[first + i][g] for i in range(len(ex))))
            x = x + rms(lin(p + "self_attn.o_proj", np.concatenate(heads)), W(p + "post_attention_layernorm.weight"))
            r = x
            y = rms(r, W(p + "pre_feedforward_layernorm.weight"))
            act = np.array([gelu(t) for t in W(p + "mlp.gate_proj.weight") @ y])
            h1 = rms(W(p + "mlp.down_proj.weight") @ (act * (W(p + "mlp.up_proj.weight") @ y)),
                     W(p + "post_feedforward_layernorm_1.weight"))
            z = rms(r) * W(p + "router.scale") / math.sqrt(H)
            lg = W(p + "router.proj.weight") @ z
            ex = [math.exp(t - max(lg)) for t in lg]
            prob = [t / sum(ex) for t in ex]
            chosen = sorted(range(E), key=lambda e: (-prob[e], e))[:k_top]
            tot = sum(prob[e] for e in chosen)
            y2 = rms(r, W(p + "pre_feedforward_layernorm_2.weight"))
            moe = np.zeros(H)
            for e in chosen:
                gu = W(p + "experts.gate_up_proj")[e] @ y2
                inner = np.array([gelu(gu[i]) * gu[I + i] for i in range(I)])
                moe += prob[e] / tot * W(p + "router.per_expert_scale")[e] * (W(p + "experts.down_proj")[e] @ inner)
            h2 = rms(moe, W(p + "post_feedforward_layernorm_2.weight"))
            x = (r + rms(h1 + h2, W(p + "post_feedforward_layernorm.weight"))) * W(p + "layer_scalar")[0]
        out = head @ rms(x, W("model.norm.weight"))
        logits.append(cap * np.tanh(out / cap) if cap else out)
    return np.array(logits)


class TestGemma4(Dirs, unittest.TestCase):
    def test_release_config(self):
        for d in (RELEASE_TEXT, multimodal(RELEASE_TEXT)):
            c = R.Config.from_dict(d)
            self.assertEqual([c.layer_head_dim(i) for i in (0, 4, 5, 29)], [256, 256, 512, 512])
            self.assertEqual([c.layer_kv_heads(i) for i in (0, 5)], [8, 2])
            self.assertEqual([c.values_are_keys(i) for i in (0, 5)], [False, True])
            self.assertEqual(c.embed_scale, 53.0)  # bf16(sqrt(2816) = 53.07)
            self.assertEqual(c.final_logit_softcapping, 30.0)
        self.assertEqual(R.Config.from_dict(RELEASE_TEXT).prefix, "model.")
        self.assertEqual(R.Config.from_dict(multimodal(RELEASE_TEXT)).prefix, "model.language_model.")
        inv = R.layer_inv_freq(512, RELEASE_TEXT["rope_parameters"]["full_attention"])
        self.assertEqual(inv.shape, (256,))
        self.assertEqual(int(np.count_nonzero(inv)), 64)  # 0.25 x 512 / 2 pairs rotate
        self.assertAlmostEqual(inv[63], 1e6 ** (-126 / 512), places=15)  # exponent over the whole head

    def test_defaults(self):
        bare = {"model_type": "gemma4_text", "hidden_size_per_layer_input": None, "enable_moe_block": True,
                "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 8, "num_hidden_layers": 8}
        c = R.Config.from_dict(bare)
        self.assertEqual(c.layer_types, ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention",
                                                                                           "full_attention"])
        self.assertEqual((c.head_dim, c.global_head_dim, c.sliding_window, c.rms_norm_eps), (256, 512, 512, 1e-6))
        self.assertEqual([c.layer_kv_heads(i) for i in (0, 5)], [4, 4])  # no k_eq_v: kv heads everywhere
        self.assertTrue(c.tie_word_embeddings)
        self.assertIsNone(c.final_logit_softcapping)
        self.assertEqual(c.embed_scale, float(np.float32(math.sqrt(2304))))  # no dtype: float32
        self.assertEqual(R.Config.from_dict(dict(bare, torch_dtype="float16")).embed_scale,
                         float(np.float16(np.float32(48.0))))
        self.assertEqual(np.count_nonzero(R.layer_inv_freq(512, c.rope_parameters["full_attention"])), 64)
        np.testing.assert_allclose(R.layer_inv_freq(256, c.rope_parameters["sliding_attention"])[1],
                                   1e4 ** (-2 / 256), rtol=1e-15)
        self.assertEqual(R.Config.from_dict(multimodal(bare, tie_word_embeddings=False)).tie_word_embeddings, False)

    def test_refusals(self):
        base = dict(RELEASE_TEXT)
        for key, value in (("hidden_size_per_layer_input", 256), ("num_kv_shared_layers", 2),
                           ("use_bidirectional_attention", "vision"), ("use_double_wide_mlp", True),
                           ("enable_moe_block", False), ("hidden_activation", "silu")):
            with self.assertRaises(NotImplementedError, msg=key):
                R.Config.from_dict(dict(base, **{key: value}))
        missing = dict(base)
        del missing["hidden_size_per_layer_input"]  # the default 256: per-layer embeddings
        with self.assertRaises(NotImplementedError):
            R.Config.from_dict(missing)
        with self.assertRaises(NotImplementedError):
            R.layer_inv_freq(8, {"rope_type": "proportional", "rope_theta": 1e6, "factor": 4.0})
        with self.assertRaises(ValueError):
            R.Config.from_dict({"model_type": "gemma3_text"})
        with self.assertRaises(ValueError):
            R.Config.from_dict({"model_type": "gemma4"})

    def test_embedding_scale_rounding(self):
        self.assertEqual(R.embedding_scale(2816, "bfloat16"), 53.0)
        self.assertEqual(R.embedding_scale(2816, "float16"), 53.0625)
        self.assertEqual(R.embedding_scale(64, "bfloat16"), 8.0)
        self.assertAlmostEqual(R.embedding_scale(2816, "float32"), math.sqrt(2816), places=5)

    def test_matches_loop_implementation(self):
        cases = (
            ("multimodal-keqv-tied-cap", multimodal(text(), dtype="bfloat16")),
            ("text-untied-bias-nocap", text(attention_k_eq_v=False, tie_word_embeddings=False, attention_bias=True,
                                            final_logit_softcapping=None, top_k_experts=3)),
            ("keqv-without-global-kv-heads", text(num_global_key_value_heads=None, sliding_window=1,
                                                  torch_dtype="float16")),
            ("full-default-rope", text(rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 500.0},
                "sliding_attention": {"rope_theta": 50.0}}, layer_types=["full_attention"] * 4)),
        )
        for label, cfg in cases:
            d = self.make(label, cfg, seed=1)
            np.testing.assert_allclose(R.load_model(d).forward(IDS), loop_forward(d, IDS), rtol=0, atol=1e-10,
                                       err_msg=label)

    def test_sliding_window_masks_and_proportional_pairs_pass_through(self):
        # Changing the first token changes a sliding layer's output only within the window.
        cfg = text(layer_types=["sliding_attention"] * 3 + ["full_attention"], num_hidden_layers=4)
        m = R.load_model(self.make("window", cfg, seed=2))
        h = m.w("model.embed_tokens.weight")[IDS] * m.config.embed_scale
        h2 = h.copy()
        h2[0] += 1.0
        a, b = m.attention(0, h), m.attention(0, h2)
        diff = np.abs(a - b).max(axis=1)
        self.assertTrue((diff[:3] > 1e-6).all())  # window 3: positions 0, 1, 2 see token 0
        np.testing.assert_array_equal(diff[3:], 0.0)
        x = np.random.default_rng(0).normal(size=(len(IDS), 2, 10))
        inv = R.layer_inv_freq(10, {"rope_type": "proportional", "rope_theta": 1000.0, "partial_rotary_factor": 0.5})
        y = R._rotate(x, inv, np.arange(len(IDS)))
        self.assertEqual(int(np.count_nonzero(inv)), 2)
        for i in (2, 3, 4, 7, 8, 9):  # pairs 2..4 have frequency 0
            np.testing.assert_array_equal(y[..., i], x[..., i])
        self.assertGreater(np.abs(y[1:, :, 0] - x[1:, :, 0]).max(), 1e-3)

    def test_towers_are_not_read_and_layouts_agree(self):
        cfg = text()
        flat = self.make("flat", cfg, seed=4)
        wrapped_tensors = random_tensors(cfg, 4, "model.language_model.")
        wrapped_tensors["model.vision_tower.encoder.layers.0.weight"] = np.ones((3, 5))
        wrapped_tensors["model.embed_vision.embedding_projection.weight"] = np.ones((16, 4))
        wrapped = self.make("wrapped", multimodal(cfg), tensors=wrapped_tensors)
        np.testing.assert_array_equal(R.load_model(wrapped).forward(IDS), R.load_model(flat).forward(IDS))

    def test_shape_mismatch_is_refused(self):
        cfg = text()
        t = random_tensors(cfg, 5)
        t["model.layers.1.self_attn.k_proj.weight"] = np.ones((20, 16))  # 2 kv heads x 10: not k_eq_v's 1
        with self.assertRaises(ValueError):
            R.load_model(self.make("bad", cfg, tensors=t))

    def test_routing_and_cli(self):
        d = self.make("cli", multimodal(text()), seed=3)
        m = R.load_model(d)
        out = m.forward(IDS, return_routing=True, return_hidden_states=True)
        self.assertEqual(len(out.routing), 4)
        self.assertEqual(len(out.hidden_states), 5)
        for L, r in enumerate(out.routing):
            self.assertEqual(r["experts"].shape, (len(IDS), 2))
            scale = m.w("model.layers.%d.router.per_expert_scale" % L)[r["experts"]]
            np.testing.assert_allclose((r["weights"] / scale).sum(1), 1.0, rtol=1e-12)
        r = subprocess.run([sys.executable, REFERENCE_SCRIPT, d, "--tokens", "4,40,13", "--json", "--routing",
                            "--greedy", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        np.testing.assert_allclose(np.array(doc["logits"]), m.forward([4, 40, 13]), rtol=0, atol=1e-12)
        self.assertEqual(doc["greedy"], R.greedy(m, [4, 40, 13], 2))
        self.assertEqual(len(doc["routing"]), 4)


if __name__ == "__main__":
    unittest.main()
