"""`tern chat` on a gpt_oss model: the harmony checks of test_chat_cli.py on
`tern synth --arch gpt_oss --preset tiny` (random weights, a synthetic
tokenizer with the harmony special tokens).

Prints SKIPPED (ctest: skipped) while synth, install or the engine do not
handle gpt_oss yet; runs as soon as they do.
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


def skip(reason):
    # CTest treats a line starting with SKIPPED: as a skipped test.
    print(f"SKIPPED: {reason}", flush=True)
    raise unittest.SkipTest(reason)


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "(no message)"


class GptOssChat(HarmonyChecks, TernTestCase):
    @classmethod
    def setUpClass(cls):
        work = tempfile.mkdtemp(prefix="tern-gpt-oss-chat-")
        cls.addClassCleanup(shutil.rmtree, work, ignore_errors=True)
        hf, model = os.path.join(work, "hf"), os.path.join(work, "m.tern")
        p = run("synth", "--arch", "gpt_oss", "--preset", "tiny", "-o", hf, "-q", check=False)
        if p.returncode != 0:
            skip(f"tern synth --arch gpt_oss is not available yet: {last_line(p.stderr)}")
        p = run("install", hf, "-o", model, "-q", check=False)
        if p.returncode != 0:
            skip(f"tern install does not take gpt_oss yet: {last_line(p.stderr)}")
        p = run("chat", model, "--prompt", "Hi", "-n", "1", check=False)
        if p.returncode != 0 and ("no forward pass" in p.stderr or "unsupported architecture" in p.stderr):
            skip(f"the engine does not run gpt_oss yet: {last_line(p.stderr)}")
        cls.model = model

    def test_harmony_is_the_chat_format(self):
        p = self.chat("--prompt", "Hi", "--print-prompt", "-n", "1")
        self.assertIn("<|start|>user<|message|>Hi<|end|><|start|>assistant\n[/prompt]", p.stderr)


if __name__ == "__main__":
    unittest.main()
