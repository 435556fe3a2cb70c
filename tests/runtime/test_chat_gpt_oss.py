"""`tern chat` on a gpt_oss model: the harmony checks of test_chat_cli.py on
`tern synth --arch gpt_oss --preset tiny` (random weights, a synthetic
tokenizer with the harmony special tokens).
"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
sys.path.insert(0, os.path.dirname(__file__))
from tern_cli import TernTestCase, run  # noqa: E402
from test_chat_cli import HarmonyChecks  # noqa: E402


class GptOssChat(HarmonyChecks, TernTestCase):
    @classmethod
    def setUpClass(cls):
        work = tempfile.mkdtemp(prefix="tern-gpt-oss-chat-")
        cls.addClassCleanup(shutil.rmtree, work, ignore_errors=True)
        hf, model = os.path.join(work, "hf"), os.path.join(work, "m.tern")
        run("synth", "--arch", "gpt_oss", "--preset", "tiny", "-o", hf, "-q")
        run("install", hf, "-o", model, "-q")
        cls.model = model

    def test_harmony_is_the_chat_format(self):
        p = self.chat("--prompt", "Hi", "--print-prompt", "-n", "1")
        self.assertIn("<|start|>user<|message|>Hi<|end|><|start|>assistant\n[/prompt]", p.stderr)


if __name__ == "__main__":
    unittest.main()
