"""Quantized installs run in the engine and stay close to the unquantized one.

A synthetic model (hidden 256, experts 256 wide so every row fits Q4_K's
256-element blocks) is installed as F32 and with each block format. We run
both on the same 80 tokens (a 48-token prompt + F32's own 32-token greedy
continuation, i.e. teacher forcing) and compare next-token logits.

Random-weight models have flat next-token distributions: at most positions
the top-2 logit margin is below the logit error any 8-bit rounding causes
(MoE routing near-ties amplify it), so "identical greedy tokens" is checked
where the F32 model is decisive, i.e. its top-2 margin >= TAU:
- Q8_0 experts + Q8_0 trunk: argmax identical at every decisive position
  (TAU = 0.25, about 4x the mean max-logit error); free-running greedy
  tokens identical up to the first step where F32's margin < TAU; mean over
  positions of max |logit diff| <= 0.03 * max |logit|; mean KL <= 1e-3.
- Q4_K, Q6_K, Q4_0, MXFP4 experts: argmax identical where margin >= 0.5;
  mean max |logit diff| <= 0.15 * max |logit|; mean KL <= 0.02 nats.
Identical free-running greedy tokens are checked on a trained, decisive
model in test_trained_model_quant.py. Measured values are in docs/RESULTS.md.
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
                            ("q4_0", ["--expert-quant", "q4_0", "--trunk-quant", "q8_0"]),
                            ("mxfp4", ["--expert-quant", "mxfp4", "--trunk-quant", "q8_0"])]:
            path = os.path.join(cls.dir, name + ".tern")
            run("install", cls.hf, "-o", path, "-q", *flags)
            cls.models[name] = path
        cls.prompt = ",".join(str((9 + 53 * i) % 1000) for i in range(48))

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.dir, ignore_errors=True)

    def logits(self, name, tokens):
        j = json.loads(run("logits", self.models[name], "--tokens", ",".join(map(str, tokens)), "--all",
                           "--json").stdout)
        return np.array(j["logits"])

    def greedy(self, name):
        return json.loads(run("generate", self.models[name], "--tokens", self.prompt, "-n", "32", "--greedy",
                              "--ignore-eos", "--json").stdout)["tokens"]

    def compare(self, name, tau):
        """Teacher-forced comparison against F32; returns (metrics, f32 greedy, margins)."""
        cont = self.greedy("f32")
        seq = [int(t) for t in self.prompt.split(",")] + cont
        a, b = self.logits("f32", seq), self.logits(name, seq)
        top2 = np.sort(a, axis=1)[:, -2:]
        margin = top2[:, 1] - top2[:, 0]
        def log_softmax(x):
            x = x - x.max(axis=1, keepdims=True)
            return x - np.log(np.exp(x).sum(axis=1, keepdims=True))
        la, lb = log_softmax(a), log_softmax(b)
        decisive = margin >= tau
        m = {
            "scale": float(np.abs(a).max()),
            "mean_max_diff": float(np.abs(a - b).max(axis=1).mean()),
            "kl": float((np.exp(la) * (la - lb)).sum(axis=1).mean()),
            "decisive": int(decisive.sum()),
            "decisive_disagree": int((a.argmax(1) != b.argmax(1))[decisive].sum()),
            "top1": float((a.argmax(1) == b.argmax(1)).mean()),
        }
        print(f"{name}: {m}")
        return m, cont, margin

    def test_manifest_records_formats(self):
        m = json.load(open(os.path.join(self.models["q4_k"], "manifest.json")))
        self.assertEqual({s["format"] for s in m["experts"]["layers"][0]["sections"]}, {"q4_k"})
        trunk = {t["name"]: t["format"] for t in m["trunk"]["tensors"]}
        self.assertEqual(trunk["model.layers.0.self_attn.q_proj.weight"], "q8_0")
        self.assertEqual(trunk["model.layers.0.input_layernorm.weight"], "f32")
        self.assertEqual(trunk["model.layers.0.mlp.gate.weight"], "f32")  # routers stay F32
        run("verify", self.models["q4_k"], "-q")

    def test_q8_0_matches_f32(self):
        tau = 0.25
        m, cont, margin = self.compare("q8_0", tau)
        self.assertGreaterEqual(m["decisive"], 16, "too few decisive positions for a meaningful check")
        self.assertEqual(m["decisive_disagree"], 0)
        self.assertLessEqual(m["mean_max_diff"], 0.03 * m["scale"])
        self.assertLessEqual(m["kl"], 1e-3)
        # Free-running greedy: identical until F32 itself is undecided.
        n_prompt = len(self.prompt.split(","))
        steps = margin[n_prompt - 1:n_prompt - 1 + 32]
        first_tie = next((i for i, x in enumerate(steps) if x < tau), 32)
        got = self.greedy("q8_0")
        print(f"q8_0 greedy: identical for {next((i for i in range(32) if got[i] != cont[i]), 32)} tokens; "
              f"F32 first undecided at step {first_tie}")
        self.assertEqual(got[:first_tie + 1], cont[:first_tie + 1])

    def test_4_bit_formats_stay_close(self):
        for name in ("q4_k", "q6_k", "q4_0", "mxfp4"):
            with self.subTest(fmt=name):
                m, _, _ = self.compare(name, 0.5)
                self.assertGreaterEqual(m["decisive"], 6)
                self.assertEqual(m["decisive_disagree"], 0)
                self.assertLessEqual(m["mean_max_diff"], 0.15 * m["scale"])
                self.assertLessEqual(m["kl"], 0.02)

    def test_placement_invariance_holds_for_quantized_weights(self):
        m = json.load(open(os.path.join(self.models["q4_k"], "manifest.json")))
        stride = m["experts"]["layers"][0]["stride"]
        a = run("logits", self.models["q4_k"], "--tokens", self.prompt, "--all", "--json", "--threads", "1",
                "--ram", str(4 * stride)).stdout
        b = run("logits", self.models["q4_k"], "--tokens", self.prompt, "--all", "--json", "--threads", "2").stdout
        self.assertEqual(a, b)


if __name__ == "__main__":
    unittest.main()
