"""End to end: hostile model files get a one-line error and exit code 1 (issue 16).

A model directory is untrusted input (downloaded, copied, shared). Each test
edits one file of a valid model the way a corrupt or malicious copy would and
runs the command a user would; it must fail cleanly, quickly, naming the file
and the field, never crash (exit code 2 = internal error, or a signal) or hang.
"""
import json
import os
import unittest

from tern_cli import TernTestCase, run

TIMEOUT = 20  # seconds; each command here takes well under one


class HostileInputs(TernTestCase):
    def synth(self):
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q", timeout=TIMEOUT)
        return self.path("hf")

    def install(self):
        run("install", self.synth(), "-o", self.path("m.tern"), "-q", timeout=TIMEOUT)
        return self.path("m.tern")

    def edit_json(self, path, fn):
        with open(path) as f:
            j = json.load(f)
        fn(j)
        with open(path, "w") as f:
            json.dump(j, f)

    def assertCleanError(self, args, *needles):
        p = run(*args, check=False, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1, f"exit code of tern {' '.join(args)}:\n{p.stderr}")
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"expected a one-line error, got:\n{p.stderr}")
        self.assertTrue(lines[0].startswith("tern: error: "), lines[0])
        for n in needles:
            self.assertIn(n, lines[0])
        return lines[0]

    # Reproduction 1: glibc aborted with "double free or corruption (out)".
    def test_manifest_config_without_head_dim(self):
        model = self.install()
        manifest = os.path.join(model, "manifest.json")
        self.edit_json(manifest, lambda m: m["config"].pop("head_dim"))
        for args in (["generate", model, "--tokens", "1,2,3", "-n", "2"], ["info", model], ["verify", model, "-q"]):
            self.assertCleanError(args, manifest, "model.layers.0.self_attn.q_proj.weight",
                                  "num_attention_heads x head_dim")

    # Reproduction 2: `tern install` never returned.
    def test_config_with_huge_num_experts(self):
        hf = self.synth()
        config = os.path.join(hf, "config.json")
        self.edit_json(config, lambda c: c.update(num_experts=9223372036854775807))
        self.assertCleanError(["install", hf, "-o", self.path("m.tern"), "-q"], config, "'num_experts'",
                              "9223372036854775807")
        self.assertFalse(os.path.exists(self.path("m.tern")))

    def test_huge_counts_in_an_installed_config(self):
        model = self.install()
        manifest = os.path.join(model, "manifest.json")
        for field in ("num_hidden_layers", "vocab_size", "hidden_size", "max_position_embeddings"):
            self.edit_json(manifest, lambda m: m["config"].update({field: 2**62}))
            self.assertCleanError(["generate", model, "--tokens", "1", "-n", "1"], manifest, f"'{field}'")
            self.edit_json(manifest, lambda m: m["config"].update({field: 8}))  # keep JSON valid for the next

    def test_tensor_table_that_disagrees_with_the_config(self):
        model = self.install()
        manifest = os.path.join(model, "manifest.json")

        def shrink_router(m):
            for t in m["trunk"]["tensors"]:
                if t["name"] == "model.layers.1.mlp.gate.weight":
                    t["shape"] = [4, 64]
                    t["size"] = 4 * 64 * 4
        self.edit_json(manifest, shrink_router)
        self.assertCleanError(["generate", model, "--tokens", "1,2", "-n", "1"], manifest,
                              "model.layers.1.mlp.gate.weight", "[num_experts, hidden_size]")

    def test_manifest_file_outside_the_model(self):
        model = self.install()
        manifest = os.path.join(model, "manifest.json")
        self.edit_json(manifest, lambda m: m["trunk"].update(file="../hf/model.safetensors"))
        self.assertCleanError(["info", model], manifest, "invalid file name")

    def test_deeply_nested_manifest(self):
        model = self.install()
        manifest = os.path.join(model, "manifest.json")
        with open(manifest) as f:
            text = f.read()
        with open(manifest, "w") as f:
            f.write(text.replace('"config": {', '"config": {"x": ' + "[" * 300000 + "]" * 300000 + ", ", 1))
        self.assertCleanError(["info", model], manifest, "nested deeper than")

    def test_kv_cache_larger_than_memory(self):
        # Each count is within its range, but their product at the longest
        # context (2 layers x 2^24 positions x 16 x 1024 x 8 bytes = 4 TiB)
        # sizes a KV cache no machine of this kind holds: refused up front,
        # not left to the allocator or the OOM killer.
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "--heads", "16", "--kv-heads", "16",
            "--head-dim", "1024", "--max-position", str(2**24), "-q", timeout=TIMEOUT)
        run("install", self.path("hf"), "-o", self.path("m.tern"), "-q", timeout=TIMEOUT)
        self.assertCleanError(["generate", self.path("m.tern"), "--tokens", "1", "-n", "1", "--ctx", str(2**24)],
                              "KV cache", "lower --ctx")

    def test_tokenizer_with_a_huge_token_id(self):
        tok = os.path.join(self.synth(), "tokenizer.json")
        self.edit_json(tok, lambda t: t["added_tokens"][0].update(id=2147483647))
        self.assertCleanError(["tokenize", tok, "hello"], tok, "invalid id 2147483647")
        self.edit_json(tok, lambda t: t["added_tokens"][0].update(id=1.5e300))
        self.assertCleanError(["tokenize", tok, "hello"], tok, "invalid id")


if __name__ == "__main__":
    unittest.main()
