"""End to end for fine-grained FP8 checkpoints, the layout DeepSeek-V3/R1 and Kimi-K2 ship
(quantization_config quant_method "fp8": every projection of the decoder layers F8_E4M3 with an
F32 "<name>_scale_inv" per weight_block_size block): `tern synth --fp8 N` writes it, `tern
install` dequantizes it, checked against the independent float64 reference's reader
(tools/reference/qwen3_moe.py TensorStore, shared by deepseek_v3.py), and corrupt or inconsistent
FP8 tensors are refused naming what is wrong, leaving no output.

A block of 24 does not divide the tiny preset's 64/32/40/96/128-wide matrices, so partial blocks
at the right and bottom edges are exercised. Jobs of whole blocks of rows past the first (large trunk tensors) are unit-tested
in test_section_convert.cpp.

    cd tests/install && TERN_BINARY=... /usr/bin/python3 -m unittest -v test_fp8_install
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
import deepseek_v3 as R  # noqa: E402
import qwen3_moe as Q  # noqa: E402

BLOCK = 24
EXPERT = "model.layers.1.mlp.experts.3.gate_proj.weight"  # [32, 64]
TRUNK = "model.layers.0.self_attn.kv_b_proj.weight"  # [128, 32]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return n, json.loads(f.read(n))


def poke(path, name, byte_offset, data):
    """Overwrites bytes of tensor `name` in a single-file checkpoint."""
    n, h = header(path)
    with open(path, "r+b") as f:
        f.seek(8 + n + h[name]["data_offsets"][0] + byte_offset)
        f.write(data)


def trunk_f32(model, name):
    m = load_json(os.path.join(model, "manifest.json"))
    t = next(t for t in m["trunk"]["tensors"] if t["name"] == name)
    assert t["format"] == "f32", t
    with open(os.path.join(model, m["trunk"]["file"]), "rb") as f:
        f.seek(t["offset"])
        return np.frombuffer(f.read(t["size"]), "<f4").reshape(t["shape"])


def expert_section_f32(model, layer, expert, section):
    m = load_json(os.path.join(model, "manifest.json"))
    entry = next(l for l in m["experts"]["layers"] if l["layer"] == layer)
    s = next(s for s in entry["sections"] if s["name"] == section)
    assert s["format"] == "f32", s
    with open(os.path.join(model, m["experts"]["file"]), "rb") as f:
        f.seek(entry["offset"] + expert * entry["stride"] + s["offset"])
        return np.frombuffer(f.read(s["size"]), "<f4").reshape(s["shape"])


class Fp8Install(TernTestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="tern-fp8-")
        cls.addClassCleanup(shutil.rmtree, cls.work, ignore_errors=True)
        cls.hf = os.path.join(cls.work, "hf")
        run("synth", "--arch", "deepseek_v3", "--preset", "tiny", "--fp8", str(BLOCK), "--seed", "9", "-o", cls.hf, "-q")
        cls.f32 = os.path.join(cls.work, "f32.tern")
        run("install", cls.hf, "-o", cls.f32, "-q", "--expert-quant", "f32", "--trunk-quant", "f32")
        cls.store = Q.TensorStore(cls.hf)

    def bad_copy(self, name):
        hf = self.path(name)
        shutil.copytree(self.hf, hf)
        return hf, os.path.join(hf, "model.safetensors")

    def test_synth_writes_the_released_layout(self):
        q = load_json(os.path.join(self.hf, "config.json"))["quantization_config"]
        self.assertEqual(q, {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                             "weight_block_size": [BLOCK, BLOCK]})
        _, h = header(os.path.join(self.hf, "model.safetensors"))
        fp8 = {k for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F8_E4M3"}
        self.assertIn(EXPERT, fp8)
        self.assertIn(TRUNK, fp8)
        self.assertIn("model.layers.1.mlp.shared_experts.down_proj.weight", fp8)
        self.assertIn("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", fp8)
        # Not quantized, as released: embeddings, lm_head, norms, the router.
        for name in ("model.embed_tokens.weight", "lm_head.weight", "model.layers.1.mlp.gate.weight",
                     "model.layers.0.self_attn.kv_a_layernorm.weight"):
            self.assertEqual(h[name]["dtype"], "BF16", name)
        for name in fp8:
            s = h[name + "_scale_inv"]
            rows, cols = h[name]["shape"]
            self.assertEqual(s["dtype"], "F32")
            self.assertEqual(s["shape"], [-(-rows // BLOCK), -(-cols // BLOCK)], name)

    def test_f32_install_holds_the_dequantized_values_exactly(self):
        # e4m3 x an F32 scale, rounded once to F32: the reference's float64 product, rounded.
        want = self.store.get(TRUNK).astype(np.float32)
        np.testing.assert_array_equal(trunk_f32(self.f32, TRUNK), want)
        want = self.store.get(EXPERT).astype(np.float32)
        np.testing.assert_array_equal(expert_section_f32(self.f32, 1, 3, "gate"), want)
        self.assertGreater(len(np.unique(self.store.get(EXPERT + "_scale_inv"))), 1, "several blocks, several scales")

    def test_default_and_quantized_installs_run_close_to_the_reference(self):
        ref = R.load_model(self.hf)
        ids = [(7 + 131 * i) % ref.config.vocab_size for i in range(16)]
        want = ref.forward(ids)
        for name, flags, bound in (("default", [], 0.15), ("source", ["--expert-quant", "source", "--trunk-quant",
                                                                       "source"], 0.03)):
            with self.subTest(install=name):
                model = self.path(name + ".tern")
                run("install", self.hf, "-o", model, "-q", *flags)
                if name == "source":  # FP8 sources are kept as BF16, as DeepSeek's own conversion writes them
                    self.assertEqual(json.loads(run("info", model, "--json").stdout)["expert_format"], "bf16")
                j = json.loads(run("logits", model, "--tokens", ",".join(map(str, ids)), "--all", "--json").stdout)
                got = np.array(j["logits"])
                rel = np.abs(got - want).max(axis=1).mean() / np.abs(want).max()
                print(f"fp8 {name}: mean max |tern - ref| / max |ref| = {rel:.3g}")
                self.assertLess(rel, bound)

    def test_qwen3_fp8_release_layout_installs_too(self):
        # Qwen3's -FP8 releases use the same layout; the reader is shared by every architecture.
        hf, model = self.path("qwen3-hf"), self.path("qwen3.tern")
        run("synth", "--arch", "qwen3_moe", "--preset", "tiny", "--fp8", "16", "--seed", "4", "-o", hf, "-q")
        _, h = header(os.path.join(hf, "model.safetensors"))
        self.assertEqual(h["model.layers.0.mlp.experts.1.up_proj.weight"]["dtype"], "F8_E4M3")
        run("install", hf, "-o", model, "-q", "--expert-quant", "f32", "--trunk-quant", "f32")
        ref = Q.load_model(hf)
        ids = [(5 + 97 * i) % ref.config.vocab_size for i in range(12)]
        want = ref.forward(ids)
        j = json.loads(run("logits", model, "--tokens", ",".join(map(str, ids)), "--all", "--json").stdout)
        err = np.abs(np.array(j["logits"]) - want).max()
        self.assertLessEqual(err, 1e-4 * max(1.0, np.abs(want).max()))

    def test_a_nan_code_is_refused(self):
        hf, st = self.bad_copy("nan-code")
        poke(st, EXPERT, 5 * 64 + 17, b"\x7f")
        self.assertFails(["install", hf, "-o", self.path("bad.tern"), "-q"],
                         EXPERT + ": row 5 column 17 is an FP8 NaN")
        self.assertFalse(os.path.exists(self.path("bad.tern")))
        poke(st, EXPERT, 5 * 64 + 17, b"\x00")
        poke(st, TRUNK, 100 * 32 + 3, b"\xff")  # a trunk tensor, in its fifth block of rows
        self.assertFails(["install", hf, "-o", self.path("bad.tern"), "-q"], TRUNK + ": row 100 column 3 is an FP8 NaN")
        self.assertFalse(os.path.exists(self.path("bad.tern")))

    def test_a_non_finite_scale_is_refused(self):
        hf, st = self.bad_copy("nan-scale")
        poke(st, TRUNK + "_scale_inv", (4 * 2 + 1) * 4, struct.pack("<f", float("inf")))
        self.assertFails(["install", hf, "-o", self.path("bad.tern"), "-q"],
                         TRUNK + "_scale_inv: block (4, 1) is inf")
        self.assertFalse(os.path.exists(self.path("bad.tern")))

    def test_missing_or_mismatched_scales_and_config_are_refused(self):
        hf, st = self.bad_copy("no-scales")
        with open(st, "r+b") as f:  # rename the scales in the header, keeping its length
            (n,) = struct.unpack("<Q", f.read(8))
            raw = f.read(n)
            renamed = raw.replace((EXPERT + "_scale_inv").encode(), (EXPERT + "_scale_inX").encode())
            self.assertNotEqual(raw, renamed)
            f.seek(8)
            f.write(renamed)
        self.assertFails(["install", hf, "-o", self.path("bad.tern"), "-q"],
                         f"'{EXPERT}' is F8_E4M3 but its scales '{EXPERT}_scale_inv' are missing")

        hf, _ = self.bad_copy("block-32")
        cfg = load_json(os.path.join(hf, "config.json"))
        cfg["quantization_config"]["weight_block_size"] = [32, 32]
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump(cfg, f)
        self.assertFails(["install", hf, "-o", self.path("bad.tern"), "-q"], "_scale_inv' has shape",
                         "weight_block_size [32, 32] implies")

        del cfg["quantization_config"]
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump(cfg, f)
        self.assertFails(["install", hf, "-o", self.path("bad.tern"), "-q"],
                         "is F8_E4M3 but config.json has no fp8 quantization_config")
        self.assertFalse(os.path.exists(self.path("bad.tern")))


if __name__ == "__main__":
    unittest.main()
