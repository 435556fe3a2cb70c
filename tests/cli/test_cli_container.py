"""End to end: tern synth -> install -> verify -> info, and bad input."""
import json
from pathlib import Path
import os
import unittest

from tern_cli import TernTestCase, run


class ContainerCli(TernTestCase):
    def synth_install(self, *synth_args):
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q", *synth_args)
        run("install", self.path("hf"), "-o", self.path("m.tern"), "-q")
        return self.path("m.tern")

    def test_synth_install_verify_info(self):
        model = self.synth_install("--shard-size", "100K")
        self.assertTrue(os.path.exists(self.path("hf", "model.safetensors.index.json")))
        out = run("verify", model).stdout
        self.assertIn("OK", out)
        info = json.loads(run("info", model, "--json").stdout)
        self.assertEqual(info["expert_format"], "q4_0")  # default q4_k falls back: tiny rows are 64 wide
        self.assertEqual(info["architecture"], "qwen3_moe")
        self.assertEqual(info["experts_per_layer"], 8)
        self.assertEqual(info["experts_per_token"], 2)
        self.assertLess(info["params"]["active_per_token"], info["params"]["total"])
        human = run("info", model).stdout
        self.assertIn("read per token", human)

    def test_info_shows_linear_attention_layers(self):
        run("synth", "--arch", "qwen3_next", "--preset", "tiny", "-o", self.path("qn-hf"), "-q")
        run("install", self.path("qn-hf"), "-o", self.path("qn.tern"), "-q")
        self.assertEqual(run("verify", self.path("qn.tern")).returncode, 0)
        info = json.loads(run("info", self.path("qn.tern"), "--json").stdout)
        self.assertEqual(info["linear_attention"]["layers"], [0, 1, 2])  # every 4th layer is full attention
        self.assertEqual((info["linear_attention"]["key_heads"], info["linear_attention"]["value_heads"]), (2, 4))
        self.assertIn("linear attention: 3 of 4 layers", run("info", self.path("qn.tern")).stdout)
        self.assertIsNone(json.loads(run("info", self.synth_install(), "--json").stdout)["linear_attention"])

    def test_info_shows_gemma4_full_layers(self):
        # gemma4 tiny: layers s, s, f, s, f (the last forced full); full layers have their own head_dim
        # (32), one kv head and values = keys; the towers' tensors are left out of the install.
        run("synth", "--arch", "gemma4", "--preset", "tiny", "-o", self.path("g4-hf"), "-q")
        p = run("install", self.path("g4-hf"), "-o", self.path("g4.tern"))
        self.assertRegex(p.stderr, r"not reading \d+ tensors \(.*\) outside 'model.language_model.' "
                                   r"\(the vision and audio towers\)")
        manifest = json.loads((Path(self.path("g4.tern")) / "manifest.json").read_text())
        names = [t["name"] for t in manifest["trunk"]["tensors"]]
        self.assertEqual([n for n in names if "vision" in n], [])
        self.assertEqual(manifest["source"]["ignored_tensors"], 2)  # the synthetic tower's two tensors
        self.assertEqual(run("verify", self.path("g4.tern")).returncode, 0)
        info = json.loads(run("info", self.path("g4.tern"), "--json").stdout)
        self.assertEqual(info["architecture"], "gemma4")
        self.assertEqual((info["attention"]["head_dim"], info["attention"]["sliding_layers"]), (16, 3))
        self.assertEqual(info["attention"]["full_layers"], {"layers": 2, "head_dim": 32, "kv_heads": 1,
                                                            "values_are_keys": True, "rotary_pairs": 4})
        self.assertIn("full layers:      2 of 5: head_dim 32, 1 kv heads, values = keys, proportional RoPE on 4 of 16",
                      run("info", self.path("g4.tern")).stdout)
        self.assertNotIn("full_layers", json.loads(run("info", self.synth_install(), "--json").stdout)["attention"])

    def test_verify_names_corrupted_expert(self):
        model = self.synth_install()
        manifest = json.load(open(os.path.join(model, "manifest.json")))
        layer = manifest["experts"]["layers"][1]
        offset = layer["offset"] + 5 * layer["stride"] + 7
        with open(os.path.join(model, "experts.bin"), "r+b") as f:
            f.seek(offset)
            b = f.read(1)
            f.seek(offset)
            f.write(bytes([b[0] ^ 0xFF]))
        p = self.assertFails(["verify", model, "-q"], "expert (layer 1, expert 5)",
                             f"offset {layer['offset'] + 5 * layer['stride']}")
        self.assertIn("checksum mismatch", p.stderr)

    def test_install_refuses_overwrite_without_force(self):
        model = self.synth_install()
        self.assertFails(["install", self.path("hf"), "-o", model, "-q"], "already exists", "--force")
        run("install", self.path("hf"), "-o", model, "-q", "--force")
        run("verify", model, "-q")

    def test_truncated_safetensors_is_a_clear_error(self):
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q")
        st = self.path("hf", "model.safetensors")
        os.truncate(st, os.path.getsize(st) - 1000)
        self.assertFails(["install", self.path("hf"), "-o", self.path("m.tern"), "-q"], "model.safetensors",
                         "truncated")
        self.assertFalse(os.path.exists(self.path("m.tern")))

    def test_corrupted_header_is_a_clear_error(self):
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q")
        st = self.path("hf", "model.safetensors")
        with open(st, "r+b") as f:
            f.seek(8)
            f.write(b"#")
        self.assertFails(["install", self.path("hf"), "-o", self.path("m.tern"), "-q"], "not valid JSON")

    def test_missing_shard_is_named(self):
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q", "--shard-size", "100K")
        shards = sorted(f for f in os.listdir(self.path("hf")) if f.endswith(".safetensors"))
        os.remove(self.path("hf", shards[1]))
        self.assertFails(["install", self.path("hf"), "-o", self.path("m.tern"), "-q"], "missing shard", shards[1])

    def test_unsupported_architecture(self):
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q")
        cfg = json.load(open(self.path("hf", "config.json")))
        cfg["model_type"] = "rwkv"
        json.dump(cfg, open(self.path("hf", "config.json"), "w"))
        self.assertFails(["install", self.path("hf"), "-o", self.path("m.tern"), "-q"],
                         "unsupported architecture 'rwkv'", "qwen3_moe")

    def test_not_a_model(self):
        os.mkdir(self.path("empty"))
        self.assertFails(["install", self.path("empty"), "-o", self.path("m.tern")], "config.json")
        self.assertFails(["verify", self.path("empty")], "no manifest.json")
        self.assertFails(["info", self.path("nowhere")], "not a .tern model")

    def test_invalid_flags(self):
        p = run("install", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("required", p.stderr)
        self.assertFails(["synth", "-o", self.path("x"), "--dtype", "q3"], "--dtype")
        self.assertFails(["synth", "-o", self.path("x"), "--preset", "enormous"], "unknown preset")
        self.assertFails(["synth", "-o", self.path("x"), "--shard-size", "lots"], "invalid size 'lots'")


if __name__ == "__main__":
    unittest.main()
