"""`tern chat` end to end on mixtral (Mistral's [INST], SentencePiece-style
tokenizer), olmoe (Tulu's format), qwen2_moe (Qwen2's ChatML), deepseek_v3 (its
<｜User｜>/<｜Assistant｜> format, byte-level BPE) and glm4_moe (GLM-4.5's
[gMASK]<sop><|user|> format, <|user|> one of its stops), gemma4 (Gemma 4's
<|turn> format, Gemma's SentencePiece-style tokenizer) and qwen3_next (Qwen3's
ChatML over linear-attention states) synthetic
models: the rendered prompt, the reply text up to the stop token, the next
turn's prompt with the history, prefix reuse across turns, and a sampled
run. Random weights write arbitrary tokens, so the shown text is checked with
the hidden --force-reply flag (its tokens are fed through the model as if
sampled) and --print-prompt."""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402

# (architecture, reply then its stop token then text that must not show, the
# first turn's prompt for "one", the second turn's for "one" -> "A", "two")
CASES = [
    ("mixtral", "Hello there</s>never shown",
     "<s>[INST] one [/INST]", "<s>[INST] one [/INST]Hello there</s>[INST] two [/INST]"),
    ("olmoe", "Hello there<|endoftext|>never shown",
     "<|endoftext|><|user|>\none\n<|assistant|>\n",
     "<|endoftext|><|user|>\none\n<|assistant|>\nHello there<|endoftext|>\n<|user|>\ntwo\n<|assistant|>\n"),
    ("qwen2_moe", "Hello there<|im_end|>never shown",
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\none<|im_end|>\n"
     "<|im_start|>assistant\n",
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\none<|im_end|>\n"
     "<|im_start|>assistant\nHello there<|im_end|>\n<|im_start|>user\ntwo<|im_end|>\n<|im_start|>assistant\n"),
    ("deepseek_v3", "Hello there<｜end▁of▁sentence｜>never shown",
     "<｜begin▁of▁sentence｜><｜User｜>one<｜Assistant｜>",
     "<｜begin▁of▁sentence｜><｜User｜>one<｜Assistant｜>Hello there<｜end▁of▁sentence｜><｜User｜>two<｜Assistant｜>"),
    ("glm4_moe", "Hello there<|user|>never shown",
     "[gMASK]<sop><|user|>\none<|assistant|>",
     "[gMASK]<sop><|user|>\none<|assistant|>\n<think></think>\nHello there<|user|>\ntwo<|assistant|>"),
    # Qwen3-Next: Qwen3's ChatML; the next turn reuses the prefix through a checkpoint of its
    # linear-attention states (they cannot step back otherwise)
    # Gemma 4: <|turn>ROLE ... <turn|> turns, the large models' empty thought block after the
    # generation prompt (thinking is off by default), <turn|> one of its stops
    ("gemma4", "Hello there<turn|>never shown",
     "<bos><|turn>user\none<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
     "<bos><|turn>user\none<turn|>\n<|turn>model\nHello there<turn|>\n<|turn>user\ntwo<turn|>\n<|turn>model\n"
     "<|channel>thought\n<channel|>"),
    ("qwen3_next", "Hello there<|im_end|>never shown",
     "<|im_start|>user\none<|im_end|>\n<|im_start|>assistant\n",
     "<|im_start|>user\none<|im_end|>\n<|im_start|>assistant\nHello there<|im_end|>\n<|im_start|>user\ntwo<|im_end|>\n"
     "<|im_start|>assistant\n"),
]


def prompts(stderr):
    return re.findall(r"\[prompt\]\n(.*?)\n\[/prompt\]", stderr, re.S)


def reused(stderr):
    return [int(n) for n in re.findall(r"context: (\d+) tokens reused", stderr)]


class LlamaMoeChat(TernTestCase):
    def model(self, arch):
        hf, model = self.path(arch + "-hf"), self.path(arch + ".tern")
        if not os.path.exists(model):
            run("synth", "--arch", arch, "--preset", "tiny", "-o", hf, "-q")
            run("install", hf, "-o", model, "-q")
        return model

    def test_prompts_replies_and_history(self):
        for arch, reply, first_prompt, second_prompt in CASES:
            with self.subTest(arch=arch):
                m = self.model(arch)
                p = run("chat", m, "--prompt", "Hi", "--force-reply", reply)
                self.assertEqual(p.stdout, "Hello there\n")
                p = run("chat", m, "--print-prompt", "--stats", "--force-reply", reply, input="one\ntwo\n/exit\n")
                self.assertEqual(prompts(p.stderr), [first_prompt, second_prompt])
                first, second = reused(p.stderr)
                self.assertEqual(first, 0)
                self.assertGreater(second, 3)  # at least the first prompt's start

    def test_sampled_reply_and_refusals(self):
        for arch, _, _, _ in CASES:
            with self.subTest(arch=arch):
                m = self.model(arch)
                out = run("chat", m, "--prompt", "Hello there", "-n", "6", "--seed", "1")
                self.assertEqual(out.returncode, 0)
        # Mixtral's template has no system role after the first message and no tools; roles alternate.
        self.assertFails(["chat", self.model("mixtral"), "--prompt", "x", "--reasoning-effort", "low"],
                         "--reasoning-effort")

    def test_gemma4_thinking_switch_and_reasoning(self):
        m = self.model("gemma4")
        p = run("chat", m, "--prompt", "one", "--think", "--print-prompt", "--show-reasoning",
                "--force-reply", "<|channel>thought\nCount.<channel|>Two.<turn|>never shown")
        self.assertEqual(prompts(p.stderr),
                         ["<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\none<turn|>\n<|turn>model\n"])
        self.assertIn("[thinking] Count.", p.stdout)
        self.assertTrue(p.stdout.rstrip().endswith("Two."), p.stdout)
        hidden = run("chat", m, "--prompt", "one", "--hide-reasoning",
                     "--force-reply", "<|channel>thought\nCount.<channel|>Two.<turn|>")
        self.assertEqual(hidden.stdout, "Two.\n")
        self.assertFails(["chat", m, "--prompt", "x", "--think", "--no-think"], "contradict")


    def test_gemma4_next_turn_reuses_the_conversation_through_its_rings(self):
        # The tiny model's window (6) is shorter than the prompt, so the session steps back
        # only to a checkpoint. The next turn renders the reply without the generation
        # prompt's empty thought block: it parts from the first prompt right after
        # "<|turn>model\n", and the checkpoint is there (not after the prompt, which
        # would leave nothing to step back to).
        m = self.model("gemma4")
        p = run("chat", m, "--print-prompt", "--stats", "--force-reply", "Hello there<turn|>",
                input="one\ntwo\n/exit\n")
        first_prompt = prompts(p.stderr)[0]
        shared = first_prompt[:first_prompt.index("<|channel>")]
        self.assertTrue(shared.endswith("<|turn>model\n"), shared)
        ids = json.loads(run("tokenize", m, shared, "--json").stdout)["ids"]
        self.assertEqual(reused(p.stderr), [0, len(ids)])

if __name__ == "__main__":
    unittest.main()
