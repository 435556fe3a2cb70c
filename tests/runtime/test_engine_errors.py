"""Bad input to the engine gets a clear error, never a crash or garbage."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TERN, TernTestCase, run  # noqa: E402


class EngineErrors(TernTestCase):
    def setUp(self):
        super().setUp()
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q")
        run("install", self.path("hf"), "-o", self.path("m.tern"), "-q")
        self.model = self.path("m.tern")

    def test_ram_below_minimum_states_the_minimum(self):
        p = self.assertFails(["generate", self.model, "--tokens", "1,2", "--ram", "1K"], "--ram", "minimum", "top-2")
        self.assertIn("use --ram", p.stderr)

    def test_prompt_beyond_context(self):
        self.assertFails(["generate", self.model, "--tokens", ",".join(["1"] * 20), "--ctx", "16"],
                         "do not fit the context")
        self.assertFails(["logits", self.model, "--tokens", "1", "--ctx", "999999"], "max_position_embeddings")

    def test_corrupted_expert_is_detected_at_first_use(self):
        m = json.load(open(os.path.join(self.model, "manifest.json")))
        with open(os.path.join(self.model, "experts.bin"), "r+b") as f:
            for layer in m["experts"]["layers"]:
                for e in range(layer["num_experts"]):
                    f.seek(layer["offset"] + e * layer["stride"] + 3)
                    b = f.read(1)
                    f.seek(layer["offset"] + e * layer["stride"] + 3)
                    f.write(bytes([b[0] ^ 1]))
        p = self.assertFails(["generate", self.model, "--tokens", "5,6,7", "-n", "2"], "checksum mismatch", "expert (layer 0, expert")
        self.assertIn("reinstall", p.stderr)

    def test_corrupted_trunk_is_detected_at_load(self):
        m = json.load(open(os.path.join(self.model, "manifest.json")))
        t = m["trunk"]["tensors"][0]
        with open(os.path.join(self.model, "trunk.bin"), "r+b") as f:
            f.seek(t["offset"])
            f.write(b"\xff\xff")
        self.assertFails(["logits", self.model, "--tokens", "1"], t["name"], "checksum mismatch")

    def test_missing_files(self):
        self.assertFails(["chat", self.path("nope"), "--prompt", "hi"], "not a .tern model")
        os.remove(os.path.join(self.model, "experts.bin"))
        self.assertFails(["generate", self.model, "--tokens", "1"], "experts.bin")

    def test_invalid_tokens_and_flags(self):
        self.assertFails(["generate", self.model, "--tokens", "1,x,3"], "invalid token id 'x'")
        self.assertFails(["generate", self.model, "--tokens", "99999999"], "outside the vocabulary")
        self.assertFails(["generate", self.model], "--prompt")
        self.assertFails(["generate", self.model, "--tokens", "1", "--temperature", "-1"], "temperature")
        self.assertFails(["generate", self.model, "--tokens", "1", "--top-p", "0"], "top-p")
        self.assertFails(["generate", self.model, "--tokens", "1", "--ram", "much"], "invalid size 'much'")
        p = run("generate", self.model, "--tokens", "1", "--threads", "-2", check=False)
        self.assertNotEqual(p.returncode, 0)
        p = run("generate", self.model, "--prompt", "a", "--tokens", "1", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("excludes", p.stderr)

    def test_unknown_kernel_path_is_a_clear_error(self):
        env = dict(os.environ, TERN_KERNELS="bogus")
        p = subprocess.run([TERN, "generate", self.model, "--tokens", "1,2", "-n", "2"], capture_output=True, text=True,
                           env=env)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("TERN_KERNELS='bogus' is not one of: auto, portable, avx2, avx512", p.stderr)
        self.assertFails(["bench", "kernels", "--paths", "bogus", "--formats", "q8_0", "--shapes", "64x64",
                          "--batches", "1", "--repeats", "1"], "kernel path 'bogus' is not one of")
        env["TERN_KERNELS"] = "portable"  # a named path that exists runs
        p = subprocess.run([TERN, "generate", self.model, "--tokens", "1,2", "-n", "2"], capture_output=True, text=True,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_invalid_utf8_prompt(self):
        r = subprocess.run([TERN.encode(), b"generate", self.model.encode(), b"--prompt", b"ab\xff\xfecd"],
                           capture_output=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"not valid UTF-8", r.stderr)

    def test_chat_and_generate_work(self):
        out = run("chat", self.model, "--prompt", "Hello there", "-n", "8", "--seed", "1").stdout
        self.assertTrue(len(out) > 0)
        j = json.loads(run("generate", self.model, "--prompt", "Hi", "-n", "5", "--json").stdout)
        self.assertEqual(len(j["tokens"]), 5)
        self.assertIn("decode_tokens_per_second", j["stats"])
        # Decode's time splits: the output head ran in every decode step,
        # within decode; reads and compute are parts of decode too.
        st = j["stats"]
        self.assertGreater(st["head_seconds"], 0)
        self.assertLess(st["head_seconds"], st["decode_seconds"])
        self.assertLessEqual(st["io_busy_seconds"], st["decode_seconds"])
        self.assertLessEqual(st["compute_busy_seconds"], st["decode_seconds"])
        p = run("generate", self.model, "--prompt", "Hi", "-n", "3", "--stats")
        self.assertIn("hit rate", p.stderr)
        self.assertIn("peak RSS", p.stderr)
        # REPL: a turn, /reset, a turn, /exit.
        r = run("chat", self.model, "-n", "4", input="hello\n/reset\nagain\n/exit\n")
        self.assertIn("[conversation cleared]", r.stderr)


if __name__ == "__main__":
    unittest.main()
