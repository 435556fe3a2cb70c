"""Placement changes speed, never semantics: the same prompt under --ram at
the minimum, at half the experts and at all experts, with 1 and 2 threads,
O_DIRECT or buffered reads, yields bit-identical logits and tokens."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402


class PlacementInvariance(TernTestCase):
    def setUp(self):
        super().setUp()
        run("synth", "--preset", "small", "--seed", "4", "-o", self.path("hf"), "-q")
        run("install", self.path("hf"), "-o", self.path("m.tern"), "-q")
        self.model = self.path("m.tern")
        m = json.load(open(os.path.join(self.model, "manifest.json")))
        layers = m["experts"]["layers"]
        stride = layers[0]["stride"]
        k = m["config"]["num_experts_per_tok"]
        total = sum(l["stride"] * l["num_experts"] for l in layers)
        self.placements = [
            ["--ram", str(k * stride), "--threads", "1"],  # the minimum
            ["--ram", str(k * stride), "--threads", "2"],
            ["--ram", str(total // 2), "--threads", "2", "--buffered-io"],  # half the experts
            ["--ram", str(total), "--threads", "1"],  # all experts
            ["--ram", str(total), "--threads", "2", "--no-verify"],
        ]
        self.tokens = ",".join(str((5 + 37 * i) % 1000) for i in range(20))

    def test_logits_are_bit_identical(self):
        outs = [run("logits", self.model, "--tokens", self.tokens, "--all", "--json", *p).stdout for p in self.placements]
        for p, o in zip(self.placements[1:], outs[1:]):
            self.assertEqual(o, outs[0], f"placement {p} changed the logits")

    def test_generated_tokens_are_identical(self):
        for mode in (["--greedy"], ["--temperature", "0.9", "--top-p", "0.9", "--seed", "7"]):
            outs = []
            for p in self.placements:
                j = json.loads(run("generate", self.model, "--tokens", self.tokens, "-n", "24", "--ignore-eos", "--json",
                                   *mode, *p).stdout)
                outs.append(j["tokens"])
                if p is self.placements[0]:
                    self.assertGreater(j["stats"]["cache_misses"], 0)
            for p, o in zip(self.placements[1:], outs[1:]):
                self.assertEqual(o, outs[0], f"placement {p} changed the tokens ({mode})")

    def test_small_cache_really_evicts(self):
        j = json.loads(run("generate", self.model, "--tokens", self.tokens, "-n", "8", "--greedy", "--json",
                           *self.placements[0]).stdout)
        s = j["stats"]
        self.assertLess(s["hit_rate"], 1.0)
        self.assertGreater(s["bytes_read"], s["cache_budget"])  # more was read than fits: evictions happened


if __name__ == "__main__":
    unittest.main()
