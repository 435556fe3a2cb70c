"""Placement changes speed, never semantics. For each architecture, the same
prompt under every placement and streaming mechanism yields bit-identical
logits and tokens: --ram from the minimum to all experts, 1 and 2 threads,
O_DIRECT or buffered reads, each I/O backend (io_uring, pread pool, mmap),
prefetch off / depth 1 / depth 2 with a margin, every cache policy, a
replica (--mirror), prefill chunk sizes, --pin-hot, --preload (the default
when the budget holds every expert) and --no-preload."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402

ARCHS = [("qwen3_moe", ["--preset", "small", "--seed", "4"]),
         ("gpt_oss", ["--arch", "gpt_oss", "--preset", "tiny", "--seed", "4"]),
         ("mixtral", ["--arch", "mixtral", "--preset", "small", "--sliding-window", "12", "--seed", "4"]),
         ("olmoe", ["--arch", "olmoe", "--preset", "tiny", "--set", "clip_qkv=1.5", "--seed", "4"]),
         ("qwen2_moe", ["--arch", "qwen2_moe", "--preset", "tiny", "--layers", "3", "--mlp-only-layers", "1",
                        "--seed", "4"]),
         # MLA over a latent KV cache, grouped sigmoid routing, an ungated shared expert, a dense first layer
         ("deepseek_v3", ["--arch", "deepseek_v3", "--preset", "tiny", "--seed", "4"]),
         # partial rotary, q/k norm, the same routing
         ("glm4_moe", ["--arch", "glm4_moe", "--preset", "tiny", "--seed", "4"]),
         # Gated DeltaNet layers (a recurrent state per sequence) beside gated attention, a shared expert
         ("qwen3_next", ["--arch", "qwen3_next", "--preset", "tiny", "--seed", "4"]),
         # sliding and full layers of two head shapes (k_eq_v), a dense GeGLU branch beside the experts
         # run while their reads are in flight, per-expert scales, softcapped logits
         ("gemma4", ["--arch", "gemma4", "--preset", "tiny", "--seed", "4"])]


class PlacementInvariance(TernTestCase):
    @classmethod
    def setUpClass(cls):
        # Each architecture's model is synthesized and installed once and shared
        # by the tests (they only read it; usage.bin is written by one test and
        # read by none other, which all pass --no-usage).
        cls.work = tempfile.mkdtemp(prefix="tern-placement-")
        cls.addClassCleanup(shutil.rmtree, cls.work, ignore_errors=True)
        cls.models = {}

    def model(self, arch, flags):
        if arch not in self.models:
            self.models[arch] = self.make_model(arch, flags)
        return self.models[arch]

    def make_model(self, arch, flags):
        hf, model = os.path.join(self.work, arch + "-hf"), os.path.join(self.work, arch + ".tern")
        run("synth", *flags, "-o", hf, "-q")
        run("install", hf, "-o", model, "-q")
        m = json.load(open(os.path.join(model, "manifest.json")))
        layers = m["experts"]["layers"]
        stride = max(l["stride"] for l in layers)
        c = m["config"].get("text_config", m["config"])  # gemma4: the multimodal config's text model
        k = c.get("num_experts_per_tok") or c.get("experts_per_token") or c.get("top_k_experts")
        total = sum(l["stride"] * l["num_experts"] for l in layers)
        mirror = os.path.join(self.work, arch + "-mirror.bin")
        shutil.copyfile(os.path.join(model, "experts.bin"), mirror)
        minimum = ["--ram", str(k * stride)]
        placements = [
            minimum + ["--threads", "1", "--prefetch", "0"],  # the reference placement
            minimum + ["--threads", "2"],
            minimum + ["--threads", "2", "--prefetch", "2", "--prefetch-margin", "2", "--policy", "lookahead"],
            ["--ram", str(total // 2), "--threads", "2", "--buffered-io", "--io", "pread"],  # half the experts
            ["--ram", str(total // 2), "--io", "mmap", "--policy", "lfu", "--prefill-chunk", "3"],
            ["--ram", str(total // 3), "--mirror", mirror, "--queue-depth", "1", "--prefill-chunk", "1"],
            ["--ram", str(total), "--threads", "1", "--preload"],  # all experts
            ["--ram", str(total), "--threads", "2", "--no-verify", "--prefetch", "0", "--no-preload"],
        ]
        return model, placements

    def tokens(self, vocab=1000):
        return ",".join(str((5 + 37 * i) % vocab) for i in range(20))

    def test_logits_are_bit_identical(self):
        for arch, flags in ARCHS:
            with self.subTest(arch=arch):
                model, placements = self.model(arch, flags)
                outs = [run("logits", model, "--tokens", self.tokens(), "--all", "--json", "--no-usage", *p).stdout
                        for p in placements]
                for p, o in zip(placements[1:], outs[1:]):
                    self.assertEqual(o, outs[0], f"{arch}: placement {p} changed the logits")

    def test_generated_tokens_are_identical(self):
        for arch, flags in ARCHS:
            model, placements = self.model(arch, flags)
            for mode in (["--greedy"], ["--temperature", "0.9", "--top-p", "0.9", "--seed", "7"]):
                with self.subTest(arch=arch, mode=mode):
                    outs = []
                    for p in placements:
                        j = json.loads(run("generate", model, "--tokens", self.tokens(), "-n", "24", "--ignore-eos",
                                           "--json", "--no-usage", *mode, *p).stdout)
                        outs.append(j["tokens"])
                        if p is placements[0]:
                            self.assertGreater(j["stats"]["cache_misses"], 0)
                    for p, o in zip(placements[1:], outs[1:]):
                        self.assertEqual(o, outs[0], f"{arch}: placement {p} changed the tokens ({mode})")

    def test_hot_experts_pinned_from_usage_give_the_same_tokens(self):
        for arch, flags in ARCHS:
            with self.subTest(arch=arch):
                model, placements = self.model(arch, flags)
                gen = ["generate", model, "--tokens", self.tokens(), "-n", "16", "--ignore-eos", "--json", "--greedy"]
                first = json.loads(run(*gen, *placements[1]).stdout)  # records usage.bin
                self.assertTrue(os.path.exists(os.path.join(model, "usage.bin")))
                stride = json.load(open(os.path.join(model, "manifest.json")))["experts"]["layers"][0]["stride"]
                budget = int(placements[3][1])
                pinned = json.loads(run(*gen, "--ram", str(budget), "--pin-hot", str(budget // 2),
                                        "--no-usage").stdout)
                self.assertEqual(pinned["tokens"], first["tokens"])
                self.assertGreater(budget // 2, stride)

    def test_a_perfect_predictor_changes_nothing_and_is_scored_perfect(self):
        # TERN_PREFETCH_ORACLE (a diagnostic) prefetches a recorded run's true
        # routing: the tokens stay the same, and every prediction it made is
        # scored a hit, which also checks that each layer's prediction lands on
        # the layer it was made for (dense layers skipped: deepseek_v3's first).
        router_recalls = []
        for arch, flags in ARCHS:
            with self.subTest(arch=arch):
                model, placements = self.model(arch, flags)
                trace = self.path(arch + ".jsonl")
                gen = ["generate", model, "--tokens", self.tokens(), "-n", "12", "--ignore-eos", "--json",
                       "--no-usage", "--temperature", "0.9", "--seed", "3", *placements[1]]
                plain = json.loads(run(*gen, "--trace", trace).stdout)
                env = dict(os.environ, TERN_PREFETCH_ORACLE=trace)
                oracle = json.loads(run(*gen, env=env).stdout)
                self.assertEqual(oracle["tokens"], plain["tokens"])
                self.assertEqual(oracle["stats"]["prediction_recall"], 1.0)
                router_recalls.append(plain["stats"]["prediction_recall"])
                with open(trace) as f:  # a trace of a model with one more MoE layer: refused, named
                    layers = len(json.loads(f.readline())["experts"])
                other = self.path(arch + "-other.jsonl")
                with open(other, "w") as f:
                    f.write(json.dumps({"experts": [[1]] * (layers + 1)}) + "\n")
                bad = run(*gen, env=dict(os.environ, TERN_PREFETCH_ORACLE=other), check=False)
                self.assertNotEqual(bad.returncode, 0)
                self.assertIn(f"TERN_PREFETCH_ORACLE: {other} lists {layers + 1} MoE layers", bad.stderr)
        self.assertLess(min(router_recalls), 0.95)  # the router's own guesses are not what is scored perfect

    def test_small_cache_really_evicts(self):
        for arch, flags in ARCHS:
            with self.subTest(arch=arch):
                model, placements = self.model(arch, flags)
                j = json.loads(run("generate", model, "--tokens", self.tokens(), "-n", "8", "--greedy", "--json",
                                   "--no-usage", *placements[0]).stdout)
                s = j["stats"]
                self.assertLess(s["hit_rate"], 1.0)
                self.assertGreater(s["bytes_read"], s["cache_budget"])  # more was read than fits: evictions

if __name__ == "__main__":
    unittest.main()
