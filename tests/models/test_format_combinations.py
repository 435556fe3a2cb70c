"""The engine runs every (expert format, trunk format) combination install offers.

One random-weight model whose every row length is a multiple of 256 (so all
block formats apply: hidden 256, experts 256 wide, head_dim 64, 2 layers of
which one is dense so the trunk holds an MLP too) is installed with each of
the 7 expert formats x 5 trunk formats. For each install: the manifest
records the formats asked for (norms, routers and biases stay F32), `verify`
passes, and next-token logits over 24 tokens are finite and close to the F32
install's: per position max |logit diff| / max |logit|, averaged over
positions, within a bound summed from the expert and the trunk format
(measured values and bounds are printed).
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402

import numpy as np  # noqa: E402

EXPERT_FORMATS = ["q4_k", "q4_0", "q8_0", "mxfp4", "bf16", "f16", "f32"]
TRUNK_FORMATS = ["q8_0", "q4_k", "bf16", "f16", "f32"]
# Mean relative logit error allowed: the experts' share plus the trunk's, each
# ~2-3x what was measured with the other part at F32 (docs/RESULTS.md).
EXPERT_BOUND = {"f32": 0.0, "f16": 5e-4, "bf16": 0.002, "q8_0": 0.008, "q4_k": 0.05, "q4_0": 0.05, "mxfp4": 0.08}
TRUNK_BOUND = {"f32": 1e-5, "f16": 0.001, "bf16": 0.005, "q8_0": 0.025, "q4_k": 0.2}


class FormatCombinations(TernTestCase):
    def test_every_combination_runs_and_stays_close_to_f32(self):
        hf = self.path("hf")
        run("synth", "--preset", "small", "--layers", "2", "--mlp-only-layers", "0", "--ffn", "256", "--experts", "8",
            "--top-k", "2", "--moe-ffn", "256", "--dtype", "f32", "--seed", "11", "-o", hf, "-q")
        tokens = ",".join(str((7 + 37 * i) % 1000) for i in range(24))

        def logits(model):
            out = run("logits", model, "--tokens", tokens, "--all", "--json").stdout
            return np.array(json.loads(out)["logits"])

        base = None
        for trunk in TRUNK_FORMATS:
            for experts in EXPERT_FORMATS:
                with self.subTest(experts=experts, trunk=trunk):
                    model = self.path(f"{experts}-{trunk}.tern")
                    run("install", hf, "-o", model, "-q", "--expert-quant", experts, "--trunk-quant", trunk)
                    with open(os.path.join(model, "manifest.json")) as f:
                        m = json.load(f)
                    self.assertEqual({s["format"] for l in m["experts"]["layers"] for s in l["sections"]}, {experts})
                    formats = {t["name"]: t["format"] for t in m["trunk"]["tensors"]}
                    self.assertEqual(formats["model.layers.0.mlp.down_proj.weight"], trunk)  # dense MLP
                    self.assertEqual(formats["model.layers.1.self_attn.o_proj.weight"], trunk)
                    self.assertEqual(formats["model.layers.1.mlp.gate.weight"], "f32")
                    self.assertEqual(formats["model.norm.weight"], "f32")
                    run("verify", model, "-q")
                    got = logits(model)
                    self.assertTrue(np.isfinite(got).all())
                    if base is None:  # the first combination is checked against F32 below too
                        base = logits(self.f32_install(hf))
                    rel = float(np.abs(got - base).max(axis=1).mean() / np.abs(base).max())
                    bound = EXPERT_BOUND[experts] + TRUNK_BOUND[trunk]
                    print(f"experts {experts:5} trunk {trunk:5}: mean max|dlogit| / scale {rel:.5f} (bound {bound:.5f})")
                    self.assertLessEqual(rel, bound)

    def f32_install(self, hf):
        model = self.path("reference-f32.tern")
        run("install", hf, "-o", model, "-q", "--expert-quant", "f32", "--trunk-quant", "f32")
        return model


if __name__ == "__main__":
    unittest.main()
