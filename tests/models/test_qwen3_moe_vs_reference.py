"""Tern's qwen3_moe forward against the independent float64 NumPy reference
(tools/reference/qwen3_moe.py, which shares no code with the engine), on
synthetic models of several shapes: logits at every position within a stated
tolerance, and identical greedy continuations.

Tolerance: Tern computes in F32 over the stored weights (exactly representable
in float64), so the difference is F32 rounding: we require
    max |tern - ref| <= 1e-4 * max(1, max |ref|)   at every position.
Measured differences are ~1e-6 (100x margin) (see docs/RESULTS.md)."""
# tern-test: every-kernel-path
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import SOURCE_DIR, TernTestCase, run  # noqa: E402

try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy is not available to this python (%s)" % sys.executable)
    sys.exit(0)

sys.path.insert(0, os.path.join(SOURCE_DIR, "tools", "reference"))
import qwen3_moe as reference  # noqa: E402

REL_TOL = 1e-4

# (name, synth flags): every acceptance shape of the issue.
SHAPES = [
    ("tiny-bf16-headdim32", ["--preset", "tiny", "--dtype", "bf16"]),
    ("tiny-f32-no-norm-topk-tied", ["--preset", "tiny", "--dtype", "f32", "--no-norm-topk", "--tie-embeddings",
                                    "--seed", "5"]),
    ("dense-layer-bias-f16", ["--preset", "tiny", "--dtype", "f16", "--layers", "3", "--mlp-only-layers", "1",
                              "--attention-bias", "--experts", "6", "--top-k", "3", "--seed", "11"]),
    ("gqa-headdim-default", ["--preset", "tiny", "--hidden", "96", "--heads", "6", "--kv-heads", "2",
                             "--head-dim", "16", "--decoder-sparse-step", "2", "--layers", "4", "--seed", "3"]),
    ("small-bf16", ["--preset", "small", "--seed", "2"]),
]


def prompt(vocab, n, salt=0):
    return [(7 + 131 * i + salt) % vocab for i in range(n)]


class Qwen3MoeVsReference(TernTestCase):
    def model(self, name, flags):
        hf = self.path(name + "-hf")
        run("synth", "-o", hf, "-q", *flags)
        run("install", hf, "-o", self.path(name + ".tern"), "-q", "--expert-quant", "source", "--trunk-quant", "source")
        return hf, self.path(name + ".tern")

    def tern_logits(self, model, ids, *extra):
        out = run("logits", model, "--tokens", ",".join(map(str, ids)), "--all", "--json", *extra).stdout
        j = json.loads(out)
        self.assertEqual(j["tokens"], ids)
        return np.array(j["logits"], dtype=np.float64)

    def test_logits_match_reference_at_every_position(self):
        for name, flags in SHAPES:
            with self.subTest(shape=name):
                hf, model = self.model(name, flags)
                ref = reference.load_model(hf)
                ids = prompt(ref.config.vocab_size, 24)
                want = ref.forward(ids)
                got = self.tern_logits(model, ids)
                self.assertEqual(got.shape, want.shape)
                err = np.abs(got - want).max()
                scale = max(1.0, np.abs(want).max())
                print(f"{name}: max |tern - ref| = {err:.3g} (scale {scale:.3g})")
                self.assertLessEqual(err, REL_TOL * scale, name)
                self.assertTrue(np.isfinite(got).all())

    def test_greedy_continuations_are_identical(self):
        for name, flags in [SHAPES[0], SHAPES[2], SHAPES[4]]:
            with self.subTest(shape=name):
                hf, model = self.model(name, flags)
                ref = reference.load_model(hf)
                ids = prompt(ref.config.vocab_size, 8, salt=1)
                want = reference.greedy(ref, ids, 32)
                out = json.loads(run("generate", model, "--tokens", ",".join(map(str, ids)), "-n", "32", "--greedy",
                                     "--ignore-eos", "--json").stdout)
                self.assertEqual(out["tokens"], want, name)


if __name__ == "__main__":
    unittest.main()
