"""End to end for gpt_oss checkpoints: `tern synth --arch gpt_oss` in both expert layouts (the
released MXFP4 one and, with --dtype, the dequantized float one) -> the independent float64
reference (tools/reference/gpt_oss.py, which reads checkpoints as Hugging Face does) computes the
same logits from both -> `tern install` repacks the MXFP4 experts bit-exactly into ggml blocks
(checked against the reference's own mapping and tools/reference/gguf_quants.py) and cuts the
float layout's fused, transposed, interleaved tensors exactly -> `tern verify` / `tern info`.

    cd tests/install && TERN_BINARY=... /usr/bin/python3 -m unittest -v test_gpt_oss_cli
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    print("SKIPPED: numpy is not available to this python (%s)" % sys.executable)
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import SOURCE_DIR, TernTestCase, run  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE_DIR, "tools", "reference"))
import gguf_quants as GQ  # noqa: E402
import gpt_oss as R  # noqa: E402

SEED = "21"
LAYERS, EXPERTS, TOP_K, H, I = 4, 8, 4, 64, 64  # the tiny preset


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read_record(model, layer, expert):
    """(record bytes, {section name: section dict}) of one expert of an installed model."""
    manifest = load_json(os.path.join(model, "manifest.json"))
    entry = next(l for l in manifest["experts"]["layers"] if l["layer"] == layer)
    with open(os.path.join(model, manifest["experts"]["file"]), "rb") as f:
        f.seek(entry["offset"] + expert * entry["stride"])
        rec = f.read(entry["record_size"])
    return rec, {s["name"]: s for s in entry["sections"]}


def section_bytes(rec, s):
    return rec[s["offset"]:s["offset"] + s["size"]]


def section_f32(rec, s):
    assert s["format"] == "f32", s
    return np.frombuffer(section_bytes(rec, s), "<f4").reshape(s["shape"])


class GptOssCli(TernTestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="tern-gpt-oss-")
        cls.addClassCleanup(shutil.rmtree, cls.work, ignore_errors=True)
        w = lambda *p: os.path.join(cls.work, *p)  # noqa: E731
        cls.mx, cls.fl = w("mx"), w("fl")
        run("synth", "--arch", "gpt_oss", "--preset", "tiny", "--seed", SEED, "-o", cls.mx, "-q")
        run("synth", "--arch", "gpt_oss", "--preset", "tiny", "--seed", SEED, "--dtype", "bf16", "-o", cls.fl, "-q")
        cls.mx_tern, cls.fl_tern, cls.fl32_tern = w("mx.tern"), w("fl.tern"), w("fl32.tern")
        run("install", cls.mx, "-o", cls.mx_tern, "-q")
        run("install", cls.fl, "-o", cls.fl_tern, "-q")
        run("install", cls.fl, "-o", cls.fl32_tern, "-q", "--expert-quant", "f32")

    def test_synth_writes_both_layouts(self):
        mx_cfg = load_json(os.path.join(self.mx, "config.json"))
        fl_cfg = load_json(os.path.join(self.fl, "config.json"))
        self.assertEqual(mx_cfg["quantization_config"]["quant_method"], "mxfp4")
        self.assertNotIn("quantization_config", fl_cfg)
        self.assertEqual(R.load_model(self.mx).expert_layout, "mxfp4")
        self.assertEqual(R.load_model(self.fl).expert_layout, "float")

    def test_reference_computes_the_same_logits_from_both_layouts(self):
        mx, fl = R.load_model(self.mx), R.load_model(self.fl)
        rng = np.random.default_rng(0)
        ids = [int(t) for t in rng.integers(0, mx.config.vocab_size, size=20)]  # longer than the window of 8
        a = mx.forward(ids, return_routing=True)
        b = fl.forward(ids)
        self.assertTrue(np.all(np.isfinite(a.logits)))
        self.assertGreater(float(np.std(a.logits[-1])), 1e-3, "logits are not degenerate")
        scale = float(np.max(np.abs(a.logits)))
        self.assertLessEqual(float(np.max(np.abs(a.logits - b))), 1e-12 * scale)
        # Routing is not degenerate: several experts are used in every layer.
        for r in a.routing:
            self.assertGreater(len(np.unique(r["experts"])), TOP_K)

    def test_mxfp4_install_holds_the_reference_ggml_blocks(self):
        store = R.TensorStore(self.mx)
        for layer in (0, 3):
            p = f"model.layers.{layer}.mlp.experts."
            for e in (0, 5, EXPERTS - 1):
                rec, sections = read_record(self.mx_tern, layer, e)
                gub, gus = store.get(p + "gate_up_proj_blocks", e), store.get(p + "gate_up_proj_scales", e)
                dnb, dns = store.get(p + "down_proj_blocks", e), store.get(p + "down_proj_scales", e)
                want = {"gate": (gub[0::2], gus[0::2]), "up": (gub[1::2], gus[1::2]), "down": (dnb, dns)}
                for name, (blocks, scales) in want.items():
                    s = sections[name]
                    self.assertEqual(s["format"], "mxfp4")
                    got = section_bytes(rec, s)
                    self.assertEqual(got, R.mxfp4_to_ggml_blocks(blocks, scales).tobytes(), f"{name} of {layer}/{e}")
                    n = blocks.shape[0] * blocks.shape[1] * 32
                    decoded = GQ.dequantize_mxfp4(got, n).reshape(blocks.shape[0], -1)
                    np.testing.assert_array_equal(decoded.astype(np.float64), R.dequantize_mxfp4(blocks, scales))
                gu_bias = store.get(p + "gate_up_proj_bias", e)
                np.testing.assert_array_equal(section_f32(rec, sections["gate_bias"]), gu_bias[0::2])
                np.testing.assert_array_equal(section_f32(rec, sections["up_bias"]), gu_bias[1::2])
                np.testing.assert_array_equal(section_f32(rec, sections["down_bias"]), store.get(p + "down_proj_bias", e))

    def test_float_install_is_the_deinterleaved_transposed_source(self):
        store = R.TensorStore(self.fl)
        for layer in (1, 2):
            p = f"model.layers.{layer}.mlp.experts."
            for e in (0, 3, EXPERTS - 1):
                rec, sections = read_record(self.fl32_tern, layer, e)
                gate_up = store.get(p + "gate_up_proj", e)  # [H, 2I], [in, out]
                down = store.get(p + "down_proj", e)  # [I, H]
                np.testing.assert_array_equal(section_f32(rec, sections["gate"]), gate_up[:, 0::2].T)
                np.testing.assert_array_equal(section_f32(rec, sections["up"]), gate_up[:, 1::2].T)
                np.testing.assert_array_equal(section_f32(rec, sections["down"]), down.T)
                np.testing.assert_array_equal(section_f32(rec, sections["up_bias"]), store.get(p + "gate_up_proj_bias", e)[1::2])
        # And the float layout holds what the MXFP4 install decodes to.
        rec_mx, sec_mx = read_record(self.mx_tern, 2, 6)
        rec_fl, sec_fl = read_record(self.fl32_tern, 2, 6)
        got = GQ.dequantize_mxfp4(section_bytes(rec_mx, sec_mx["down"]), H * I).reshape(H, I)
        np.testing.assert_array_equal(got, section_f32(rec_fl, sec_fl["down"]))

    def test_verify_and_info(self):
        store = R.TensorStore(self.mx)
        trunk = sum(int(np.prod(store.shape(n))) for n in store.where if ".mlp.experts." not in n)
        per_expert = 3 * I * H + 2 * I + H
        record = 3 * (I * H // 32 * 17) + (2 * I + H) * 4
        for model, formats in ((self.mx_tern, "f32,mxfp4"), (self.fl_tern, "f32,q4_0"), (self.fl32_tern, "f32")):
            self.assertIn("OK", run("verify", model).stdout)
            info = json.loads(run("info", model, "--json").stdout)
            self.assertEqual(info["architecture"], "gpt_oss")
            self.assertEqual(info["moe_layers"], LAYERS)
            self.assertEqual(info["experts_per_layer"], EXPERTS)
            self.assertEqual(info["experts_per_token"], TOP_K)
            self.assertEqual(info["expert_format"], formats)
            self.assertEqual(info["params"]["trunk"], trunk)
            self.assertEqual(info["params"]["experts"], LAYERS * EXPERTS * per_expert)
            self.assertEqual(info["params"]["active_per_token"], trunk + LAYERS * TOP_K * per_expert)
            self.assertEqual(info["attention"], {"heads": 4, "kv_heads": 2, "head_dim": 32, "sliding_window": 8,
                                                 "sliding_layers": 2, "sinks": True})
        info = json.loads(run("info", self.mx_tern, "--json").stdout)
        self.assertEqual(info["bytes"]["experts"], LAYERS * EXPERTS * record)
        self.assertEqual(info["source_layout"], "mxfp4")
        human = run("info", self.mx_tern).stdout
        self.assertIn("sliding window 8 on 2 of 4 layers, sinks", human)
        self.assertIn("installed from the mxfp4 layout", human)

    def test_explicit_expert_quant_requantizes(self):
        model = self.path("q8.tern")
        run("install", self.mx, "-o", model, "-q", "--expert-quant", "q8_0")
        info = json.loads(run("info", model, "--json").stdout)
        self.assertEqual(info["expert_format"], "f32,q8_0")
        rec, sections = read_record(model, 1, 2)
        store = R.TensorStore(self.mx)
        p = "model.layers.1.mlp.experts."
        want = R.dequantize_mxfp4(store.get(p + "gate_up_proj_blocks", 2), store.get(p + "gate_up_proj_scales", 2))[1::2]
        got = GQ.dequantize_q8_0(section_bytes(rec, sections["up"]), I * H).reshape(I, H)
        self.assertLess(float(np.max(np.abs(got - want))), 0.01 * float(np.max(np.abs(want))))
        self.assertGreater(float(np.max(np.abs(got - want))), 0, "requantized, not copied")

    def test_scale_byte_255_is_refused(self):
        hf = self.path("bad")
        shutil.copytree(self.mx, hf)
        path = os.path.join(hf, "model.safetensors")
        with open(path, "r+b") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
            entry = header["model.layers.1.mlp.experts.gate_up_proj_scales"]  # [8, 128, 2]
            f.seek(8 + n + entry["data_offsets"][0] + (3 * 128 + 9) * 2)
            f.write(b"\xff")
        p = self.assertFails(["install", hf, "-o", self.path("bad.tern"), "-q"],
                             "model.layers.1.mlp.experts.gate_up_proj_scales expert 3: row 9 block 0",
                             "scale byte 255")
        self.assertFalse(os.path.exists(self.path("bad.tern")))


if __name__ == "__main__":
    unittest.main()
