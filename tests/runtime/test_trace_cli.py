"""Routing traces end to end: record with generate/chat/trace record, replay with trace replay."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402

PROMPT = [5, 9, 2, 33, 7, 1, 12]
NEW = 6
EXPERTS, TOP_K = 8, 2  # the tiny preset


def read_lines(path):
    with open(path) as f:
        text = f.read()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


class TraceCli(TernTestCase):
    def setUp(self):
        super().setUp()
        # 3 layers, layer 1 dense: the trace has 2 lists per token.
        run("synth", "--preset", "tiny", "--layers", "3", "--mlp-only-layers", "1", "-o", self.path("hf"), "-q")
        run("install", self.path("hf"), "-o", self.path("m.tern"), "-q")
        self.model = self.path("m.tern")
        self.tokens = ",".join(map(str, PROMPT))

    def generate(self, *extra):
        p = run("generate", self.model, "--tokens", self.tokens, "-n", NEW, "--ignore-eos", "--json", *extra)
        return json.loads(p.stdout)

    def replay(self, trace, *extra):
        return json.loads(run("trace", "replay", trace, "--json", *extra).stdout)

    def test_generate_records_every_token_run_and_replay_counts_them(self):
        trace = self.path("g.jsonl")
        traced = self.generate("--trace", trace)
        self.assertEqual(traced["tokens"], self.generate()["tokens"])  # recording changes nothing
        lines = read_lines(trace)
        # Prompt tokens and generated ones; the last generated token is returned, never run.
        self.assertEqual(len(lines), len(PROMPT) + NEW - 1)
        self.assertEqual([x["position"] for x in lines], list(range(len(lines))))
        self.assertEqual([x["token"] for x in lines], PROMPT + traced["tokens"][:-1])
        for x in lines:
            self.assertEqual(len(x["experts"]), 2)  # MoE layers only
            for ids, weights in zip(x["experts"], x["weights"]):
                self.assertEqual(len(ids), TOP_K)
                self.assertEqual(len(set(ids)), TOP_K)
                self.assertTrue(all(0 <= e < EXPERTS for e in ids))
                self.assertEqual(len(weights), TOP_K)
                self.assertTrue(all(0 < w <= 1 for w in weights))
                self.assertEqual(weights, sorted(weights, reverse=True))  # the router's order

        accesses = len(lines) * 2 * TOP_K
        distinct = len({(l, e) for x in lines for l, ids in enumerate(x["experts"]) for e in ids})
        out = self.replay(trace, "--capacity", 2 * EXPERTS)  # every expert fits
        self.assertEqual(list(out["policies"]), ["lru", "lfu", "fifo", "lookahead-oracle", "belady"])
        self.assertEqual(out["accesses"], accesses)
        self.assertEqual(out["capacity"], 2 * EXPERTS)
        for name, r in out["policies"].items():
            self.assertEqual(r["hits"], accesses - distinct, name)  # only first uses miss
            self.assertEqual(r["misses"], distinct, name)
            self.assertAlmostEqual(r["hit_rate"], (accesses - distinct) / accesses, places=12)

        small = self.replay(trace, "--capacity", TOP_K + 1, "--policy", "lru,belady")
        self.assertEqual(list(small["policies"]), ["lru", "belady"])
        self.assertGreaterEqual(small["policies"]["belady"]["hits"], small["policies"]["lru"]["hits"])
        self.assertFails(["trace", "replay", trace, "--capacity", TOP_K - 1], "capacity 1 cannot hold", "at least 2")

        text = run("trace", "replay", trace, "--capacity", 4).stdout
        self.assertIn(f"{len(lines)} tokens x 2 MoE layers, {accesses} expert demands", text)
        for name in ["lru", "lfu", "fifo", "lookahead-oracle", "belady"]:
            self.assertIn(name, text)

    def test_replay_counts_what_the_engines_cache_counts(self):
        self.check_replay_counts_engine_counts(self.model, TOP_K)

    def test_replay_counts_what_the_engines_cache_counts_on_gpt_oss(self):
        # The same mechanism below another architecture (4 MoE layers, top-4 of 8).
        run("synth", "--arch", "gpt_oss", "--preset", "tiny", "-o", self.path("go-hf"), "-q")
        run("install", self.path("go-hf"), "-o", self.path("go.tern"), "-q")
        self.check_replay_counts_engine_counts(self.path("go.tern"), 4)

    def check_replay_counts_engine_counts(self, model, top_k):
        # With prefetch off and one prompt token per step, the engine's cache
        # sees exactly the replay's demands, served in the MoE block's order.
        def run_engine(*extra):
            usage = os.path.join(model, "usage.bin")  # would seed lfu's counts
            if os.path.exists(usage):
                os.remove(usage)
            p = run("generate", model, "--tokens", self.tokens, "-n", 40, "--ignore-eos", "--json",
                    "--no-usage", *extra)
            return json.loads(p.stdout)["stats"]

        trace = self.path(os.path.basename(model) + "-long.jsonl")
        run_engine("--trace", trace)
        with open(os.path.join(model, "manifest.json")) as f:
            stride = max(l["stride"] for l in json.load(f)["experts"]["layers"])
        compared = 0
        for policy in ["lru", "lfu"]:
            for capacity in [top_k, top_k + 1, top_k + 3, 2 * top_k + 2]:
                stats = run_engine("--prefetch", 0, "--prefill-chunk", 1, "--policy", policy,
                                   "--ram", capacity * stride)
                r = self.replay(trace, "--capacity", capacity, "--policy", policy)
                r = r["policies"][policy]
                self.assertEqual((stats["cache_hits"], stats["cache_misses"]), (r["hits"], r["misses"]),
                                 f"{model}: {policy} at {capacity} experts")
                compared += r["hits"]
        self.assertGreater(compared, 0)

    def test_trace_record_writes_what_generate_trace_writes(self):
        self.generate("--trace", self.path("g.jsonl"))
        p = run("trace", "record", self.model, "--tokens", self.tokens, "-n", NEW, "--ignore-eos",
                "-o", self.path("r.jsonl"))
        self.assertIn(f"{len(PROMPT) + NEW - 1} lines", p.stderr)
        with open(self.path("g.jsonl")) as g, open(self.path("r.jsonl")) as r:
            self.assertEqual(g.read(), r.read())

    def test_chat_records_its_turn(self):
        trace = self.path("c.jsonl")
        run("chat", self.model, "--prompt", "hello there", "-n", 4, "--trace", trace)
        lines = read_lines(trace)
        self.assertGreater(len(lines), 4)
        self.assertEqual([x["position"] for x in lines], list(range(len(lines))))
        self.replay(trace, "--capacity", 4)

    def test_ram_converts_with_the_models_expert_size(self):
        trace = self.path("g.jsonl")
        self.generate("--trace", trace)
        with open(os.path.join(self.model, "manifest.json")) as f:
            stride = max(l["stride"] for l in json.load(f)["experts"]["layers"])
        self.assertEqual(self.replay(trace, "--ram", 5 * stride, "--model", self.model)["capacity"], 5)
        self.assertEqual(self.replay(trace, "--ram", "1M", "--record-bytes", 65536)["capacity"], 16)
        self.assertFails(["trace", "replay", trace, "--ram", "1M"], "--model MODEL.tern or --record-bytes")
        self.assertFails(["trace", "replay", trace], "--capacity N (experts) or --ram SIZE")

    def test_bad_traces_are_clear_errors(self):
        bad = self.path("bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"experts": [[1, 2], [3, 4]]}\n{"experts": [[1, 2]]}\n')
        self.assertFails(["trace", "replay", bad, "--capacity", 4], "bad.jsonl:2:", "1 layer lists, but line 1 has 2")
        with open(bad, "w") as f:
            f.write('{"experts": [[1, 2], [3, 4]]}\n{"experts": [[1, 2], [3, 4]\n')
        self.assertFails(["trace", "replay", bad, "--capacity", 4], "bad.jsonl:2:", "invalid JSON")
        with open(bad, "w") as f:
            f.write('{"experts": [[1, 2], [3, 9]]}\n')
        self.assertFails(["trace", "replay", bad, "--capacity", 4, "--model", self.model],
                         "expert 9 in MoE layer 1", "8 experts")
        with open(bad, "w") as f:
            f.write('{"experts": [[1, 2], [3, 4], [5, 6]]}\n')
        self.assertFails(["trace", "replay", bad, "--capacity", 4, "--model", self.model], "3 MoE layers", "has 2")
        self.assertFails(["trace", "replay", bad, "--capacity", 4, "--policy", "lru,mru"], "'mru'", "belady")
        self.assertFails(["trace", "replay", self.path("none.jsonl"), "--capacity", 4], "none.jsonl")


if __name__ == "__main__":
    unittest.main()
