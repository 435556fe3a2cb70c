"""tern compare: per-layer error, routing differences and next-token KL of one
install against another."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402


class Compare(TernTestCase):
    def test_identical_installs_compare_equal_and_formats_differ_slightly(self):
        run("synth", "--preset", "tiny", "--dtype", "f32", "-o", self.path("hf"), "-q")
        run("install", self.path("hf"), "-o", self.path("a.tern"), "-q", "--expert-quant", "source", "--trunk-quant", "source")
        run("install", self.path("hf"), "-o", self.path("b.tern"), "-q", "--expert-quant", "source", "--trunk-quant", "source")
        run("install", self.path("hf"), "-o", self.path("c.tern"), "-q", "--expert-quant", "bf16", "--trunk-quant", "bf16")
        toks = ",".join(str(i * 13 % 500) for i in range(16))
        same = json.loads(run("compare", self.path("a.tern"), self.path("b.tern"), "--tokens", toks, "--json").stdout)
        self.assertEqual(same["positions"], 16)
        self.assertEqual(same["top1_agreement"], 1.0)
        self.assertEqual(same["mean_kl"], 0.0)
        for layer in same["layers"]:
            self.assertEqual(layer["relative_error"], 0.0)
            self.assertEqual(layer["router_mismatch"], 0.0)
        bf = json.loads(run("compare", self.path("a.tern"), self.path("c.tern"), "--tokens", toks, "--json").stdout)
        self.assertGreater(bf["layers"][-1]["relative_error"], 0.0)  # bf16 rounding is visible...
        self.assertLess(bf["layers"][-1]["relative_error"], 0.05)  # ...and small
        self.assertGreater(bf["layers"][0]["min_cosine"], 0.99)
        text = run("compare", self.path("a.tern"), self.path("c.tern"), "--tokens", toks).stdout
        self.assertIn("top-1 agreement", text)

    def test_different_models_are_refused(self):
        run("synth", "--preset", "tiny", "-o", self.path("x"), "-q")
        run("synth", "--preset", "tiny", "--layers", "3", "-o", self.path("y"), "-q")
        run("install", self.path("x"), "-o", self.path("x.tern"), "-q")
        run("install", self.path("y"), "-o", self.path("y.tern"), "-q")
        self.assertFails(["compare", self.path("x.tern"), self.path("y.tern"), "--tokens", "1,2"], "differ")


if __name__ == "__main__":
    unittest.main()
