"""TERN_TIMELINE: the streamer's decode timeline agrees with the engine's own figures.

`TERN_TIMELINE=PATH` marks expert reads (queued, off the device, verified),
layers, MoE blocks, waits and the output head (src/tern/core/timeline.h);
tools/timeline.py charges each moment the disk sat idle to what the compute
was doing, and each wait to the kind of read it waited for. Its disk-busy and
stall fractions are computed from the marks alone, independently of the
engine's counters (io_busy_seconds, io_stall_fraction), so the two agreeing
checks the marks sit where the engine counts (measured on this model: 82.3 vs
82.3% busy, 40.6 vs 40.9% stall with prefetch; 78.0 vs 78.2, 60.8 vs 61.2%
without).
"""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import SOURCE_DIR, TernTestCase, run  # noqa: E402

TOOL = os.path.join(SOURCE_DIR, "tools", "timeline.py")


class Timeline(TernTestCase):
    def setUp(self):
        super().setUp()
        self.model = self.path("m.tern")
        run("synth", "--preset", "small", "--seed", "4", "-o", self.path("hf"), "-q")
        run("install", self.path("hf"), "-o", self.model, "-q")
        with open(os.path.join(self.model, "manifest.json")) as f:
            m = json.load(f)
        # Under half the experts: decode misses and reads.
        self.ram = str(sum(l["stride"] * l["num_experts"] for l in m["experts"]["layers"]) * 2 // 5)

    def generate(self, *flags, env=None):
        out = run("generate", self.model, "--tokens", "100,103,106,109", "-n", "24", "--ignore-eos", "--json",
                  "--greedy", "--no-usage", "--ram", self.ram, *flags, env=dict(os.environ, **(env or {})))
        return json.loads(out.stdout)["stats"]

    def timeline(self, log):
        out = subprocess.run([sys.executable, TOOL, "--skip-tokens", "0", "--json", log], capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout)

    def test_the_timeline_matches_the_engines_io_busy_and_stall(self):
        for depth in ("1", "0"):
            with self.subTest(prefetch=depth):
                log = self.path(f"t{depth}.tsv")
                s = self.generate("--prefetch", depth, env={"TERN_TIMELINE": log})
                t = self.timeline(log)
                self.assertEqual(t["tokens"], 23)  # 24 tokens: the prompt's forward gives the first
                self.assertAlmostEqual(t["disk_busy_fraction"], s["io_busy_seconds"] / s["decode_seconds"], delta=0.05)
                self.assertAlmostEqual(t["stall_fraction"], s["io_stall_fraction"], delta=0.05)
                self.assertGreater(t["stall_fraction"], 0.0)
                self.assertAlmostEqual(sum(t["phase"].values()), 1.0, delta=1e-6)
                self.assertAlmostEqual(sum(t["stall"].values()), t["stall_fraction"], delta=1e-6)
                self.assertGreater(t["reads"]["demand"], 0)
                if depth == "0":
                    self.assertEqual(t["reads"]["prefetch"], 0)
                    self.assertTrue(all("demand" in k for k in t["stall"]), t["stall"])
                else:
                    self.assertGreater(t["reads"]["prefetch"], 0)

    def test_the_engines_marks_are_in_time_order_and_a_log_out_of_order_is_refused(self):
        log = self.path("t.tsv")
        self.generate("--prefetch", "1", env={"TERN_TIMELINE": log})
        with open(log) as f:
            us = [int(line.split("\t")[0]) for line in f]
        self.assertGreater(len(us), 100)
        self.assertEqual(us, sorted(us))  # marks from the I/O and compute threads interleave in time order
        bad = self.path("bad.tsv")
        with open(bad, "w") as f:
            f.write("10\tl\t0\t1\n5\th\t0\t0\n")
        out = subprocess.run([sys.executable, TOOL, bad], capture_output=True, text=True)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("not in time order", out.stderr)

    def test_an_unwritable_path_warns_and_changes_nothing(self):
        env = {"TERN_TIMELINE": self.path("no", "such", "dir", "t.tsv")}
        out = run("generate", self.model, "--tokens", "100,103,106,109", "-n", "8", "--ignore-eos", "--json",
                  "--greedy", "--no-usage", "--ram", self.ram, env=dict(os.environ, **env))
        plain = run("generate", self.model, "--tokens", "100,103,106,109", "-n", "8", "--ignore-eos", "--json",
                    "--greedy", "--no-usage", "--ram", self.ram)
        self.assertIn("TERN_TIMELINE: cannot write", out.stderr)
        self.assertEqual(json.loads(out.stdout)["tokens"], json.loads(plain.stdout)["tokens"])


if __name__ == "__main__":
    unittest.main()
