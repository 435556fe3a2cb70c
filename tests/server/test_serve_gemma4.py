"""`tern serve` with Gemma 4's chat format: a thought channel comes back as `reasoning_content`
when chat_template_kwargs.enable_thinking turns thinking on, and a conversation's next turn
reuses the prompt through the sliding-window rings.

The tiny gemma4 preset's window (6 keys) is shorter than any prompt here, so a session can
step back only to a checkpoint. The next turn renders the reply without the generation
prompt's empty thought block, so it parts from the first prompt right after "<|turn>model\\n":
the server checkpoints there, and the second request reuses exactly that many tokens (a
checkpoint after the whole prompt would leave nothing to step back to). Weights are random:
replies are forced with the hidden --force-reply flag (fed through the model as if sampled)."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, run  # noqa: E402

THOUGHT_THEN_ANSWER = "<|channel>thought\nCount.<channel|>Hello there<turn|>"


class Gemma4ServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tern-serve-gemma4-")
        hf = os.path.join(cls.tmp, "hf")
        run("synth", "--arch", "gemma4", "--preset", "tiny", "-o", hf, "-q")
        cls.model = os.path.join(cls.tmp, "gemma4.tern")
        run("install", hf, "-o", cls.model, "-q")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def tokens(self, text):
        return json.loads(run("tokenize", self.model, text, "--json").stdout)["ids"]

    def test_next_turn_reuses_the_prompt_up_to_the_reply(self):
        s = Server(self.model, "--force-reply", "Hello there<turn|>", "--parallel", 1)
        try:
            history = [{"role": "user", "content": "one"}]
            status, _, first = s.post("/v1/chat/completions", {"messages": history})
            self.assertEqual(status, 200, first)
            self.assertEqual(first["choices"][0]["message"]["content"], "Hello there")
            prompt = "<bos><|turn>user\none<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"
            self.assertEqual(first["usage"]["prompt_tokens"], len(self.tokens(prompt)))
            history += [{"role": "assistant", "content": "Hello there"}, {"role": "user", "content": "two"}]
            _, _, second = s.post("/v1/chat/completions", {"messages": history})
            shared = prompt[:prompt.index("<|channel>")]
            self.assertEqual(second["usage"]["prompt_tokens_details"]["cached_tokens"], len(self.tokens(shared)))
            # The same turn again (a regenerate) steps back to that checkpoint too.
            _, _, again = s.post("/v1/chat/completions", {"messages": history})
            self.assertEqual(again["choices"][0]["message"]["content"], "Hello there")
            self.assertGreater(again["usage"]["prompt_tokens_details"]["cached_tokens"], len(self.tokens(shared)))
        finally:
            self.assertEqual(s.stop(), 0)

    def test_thinking_switch_and_reasoning_content(self):
        s = Server(self.model, "--force-reply", THOUGHT_THEN_ANSWER, "--print-prompt")
        try:
            body = {"messages": [{"role": "user", "content": "one"}],
                    "chat_template_kwargs": {"enable_thinking": True}}
            status, _, r = s.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, r)
            m = r["choices"][0]["message"]
            self.assertEqual((m.get("reasoning_content"), m["content"]), ("Count.", "Hello there"))
            self.assertIn("<|turn>system\n<|think|>", "".join(s.log))
        finally:
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
