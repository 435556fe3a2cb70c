"""Quantized installs run in the engine and stay close to the unquantized one.

A synthetic model (hidden 256, experts 256 wide so every row fits Q4_K's
256-element blocks) is installed as F32 and with each block format; tokens
and logits are compared. Tolerances (measured values in docs/RESULTS.md):
- Q8_0 experts + Q8_0 trunk: identical greedy tokens (32) and
  max |logit - f32 logit| <= 0.05 * max(1, max |f32 logit|).
- Q4_K / Q4_0 / MXFP4 experts (Q8_0 trunk): top-1 agreement >= 70% and
  mean KL <= 0.15 nats against F32 on a 48-token prompt.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402

import numpy as np  # noqa: E402


class QuantizedEngine(TernTestCase):
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.dir = tempfile.mkdtemp(prefix="tern-quant-")
        cls.hf = os.path.join(cls.dir, "hf")
        run("synth", "--preset", "small", "--moe-ffn", "256", "--dtype", "f32", "--seed", "6", "-o", cls.hf, "-q")
        cls.models = {}
        for name, flags in [("f32", ["--expert-quant", "f32", "--trunk-quant", "f32"]),
                            ("q8_0", ["--expert-quant", "q8_0", "--trunk-quant", "q8_0"]),
                            ("q4_k", ["--expert-quant", "q4_k", "--trunk-quant", "q8_0"]),
                            ("q6_k", ["--expert-quant", "q6_k", "--trunk-quant", "q8_0"]),
                            ("q4_0", ["--expert-quant", "q4_0", "--trunk-quant", "q4_0"]),
                            ("mxfp4", ["--expert-quant", "mxfp4", "--trunk-quant", "q8_0"])]:
            path = os.path.join(cls.dir, name + ".tern")
            run("install", cls.hf, "-o", path, "-q", *flags)
            cls.models[name] = path
        cls.prompt = ",".join(str((9 + 53 * i) % 1000) for i in range(48))

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.dir, ignore_errors=True)

    def logits(self, name):
        j = json.loads(run("logits", self.models[name], "--tokens", self.prompt, "--all", "--json").stdout)
        return np.array(j["logits"])

    def greedy(self, name):
        return json.loads(run("generate", self.models[name], "--tokens", self.prompt, "-n", "32", "--greedy",
                              "--ignore-eos", "--json").stdout)["tokens"]

    def test_manifest_records_formats(self):
        m = json.load(open(os.path.join(self.models["q4_k"], "manifest.json")))
        self.assertEqual({s["format"] for s in m["experts"]["layers"][0]["sections"]}, {"q4_k"})
        trunk = {t["name"]: t["format"] for t in m["trunk"]["tensors"]}
        self.assertEqual(trunk["model.layers.0.self_attn.q_proj.weight"], "q8_0")
        self.assertEqual(trunk["model.layers.0.input_layernorm.weight"], "f32")
        self.assertEqual(trunk["model.layers.0.mlp.gate.weight"], "f32")  # routers stay F32
        run("verify", self.models["q4_k"], "-q")

    def test_q8_0_matches_f32(self):
        ref, got = self.logits("f32"), self.logits("q8_0")
        err = np.abs(got - ref).max()
        scale = max(1.0, np.abs(ref).max())
        print(f"q8_0: max |logit diff| = {err:.4f} (scale {scale:.2f})")
        self.assertLessEqual(err, 0.05 * scale)
        self.assertEqual(self.greedy("q8_0"), self.greedy("f32"))

    def test_4_bit_formats_stay_close(self):
        for name in ("q4_k", "q6_k", "q4_0", "mxfp4"):
            with self.subTest(fmt=name):
                c = json.loads(run("compare", self.models["f32"], self.models[name], "--tokens", self.prompt,
                                   "--json").stdout)
                print(f"{name}: mean KL {c['mean_kl']:.4f}, top-1 {c['top1_agreement']:.2f}, "
                      f"last-layer rel err {c['layers'][-1]['relative_error']:.4f}")
                self.assertGreaterEqual(c["top1_agreement"], 0.70)
                self.assertLessEqual(c["mean_kl"], 0.15)

    def test_placement_invariance_holds_for_quantized_weights(self):
        m = json.load(open(os.path.join(self.models["q4_k"], "manifest.json")))
        stride = m["experts"]["layers"][0]["stride"]
        a = run("logits", self.models["q4_k"], "--tokens", self.prompt, "--all", "--json", "--threads", "1",
                "--ram", str(4 * stride)).stdout
        b = run("logits", self.models["q4_k"], "--tokens", self.prompt, "--all", "--json", "--threads", "2").stdout
        self.assertEqual(a, b)


if __name__ == "__main__":
    unittest.main()
