"""`tern chat` end to end, in both chat formats.

Random weights write arbitrary tokens, so the checks on what is shown use
the hidden developer flag --force-reply TEXT (its tokens are fed through the
model as if sampled) and --print-prompt (each rendered prompt on stderr);
sampled runs are checked only for their structure (exit code, token limit).

Harmony runs here on a qwen3_moe trunk whose tokenizer carries GPT-OSS's
special tokens (a tokenizer with harmony's tokens and no ChatML ones speaks
harmony), so the chat side is tested whatever the state of the gpt_oss
forward pass; test_chat_gpt_oss.py repeats the checks on a real gpt_oss model.
"""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TernTestCase, run  # noqa: E402

# GPT-OSS's added tokens in id order (ids 199998..200018 in the real tokenizer).
HARMONY_ADDED = ["<|startoftext|>", "<|endoftext|>", "<|reserved_200000|>", "<|reserved_200001|>", "<|return|>",
                 "<|constrain|>", "<|reserved_200004|>", "<|channel|>", "<|start|>", "<|end|>", "<|message|>",
                 "<|reserved_200009|>", "<|reserved_200010|>", "<|reserved_200011|>", "<|call|>",
                 "<|reserved_200013|>", "<|reserved_200014|>", "<|reserved_200015|>", "<|reserved_200016|>",
                 "<|reserved_200017|>", "<|endofprompt|>"]

ANALYSIS_THEN_FINAL = ("<|channel|>analysis<|message|>Thinking hard.<|end|>"
                       "<|start|>assistant<|channel|>final<|message|>Hello there<|return|>never shown")


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def save_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def harmony_tokenizer_files(hf_dir):
    """Rewrites a synthesized checkpoint's tokenizer files to use GPT-OSS's special tokens."""
    path = os.path.join(hf_dir, "tokenizer.json")
    tok = load_json(path)
    first = tok["added_tokens"][0]["id"]
    tok["added_tokens"] = [{"id": first + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True} for i, c in enumerate(HARMONY_ADDED)]
    save_json(path, tok)
    ids = {c: first + i for i, c in enumerate(HARMONY_ADDED)}
    save_json(os.path.join(hf_dir, "tokenizer_config.json"),
              {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>",
               "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"})
    gen_path = os.path.join(hf_dir, "generation_config.json")
    gen = load_json(gen_path)
    gen.update(bos_token_id=ids["<|startoftext|>"], pad_token_id=ids["<|endoftext|>"],
               eos_token_id=[ids["<|return|>"], ids["<|endoftext|>"], ids["<|call|>"]])
    save_json(gen_path, gen)
    cfg_path = os.path.join(hf_dir, "config.json")
    cfg = load_json(cfg_path)
    cfg.update(eos_token_id=ids["<|return|>"], bos_token_id=ids["<|startoftext|>"])
    save_json(cfg_path, cfg)


def prompts(stderr):
    return re.findall(r"\[prompt\]\n(.*?)\n\[/prompt\]", stderr, re.S)


def reused(stderr):
    return [int(n) for n in re.findall(r"context: (\d+) tokens reused", stderr)]


class HarmonyChecks:
    """Checks of the harmony chat; the subclass sets self.model (a .tern)."""

    def chat(self, *args, **kw):
        return run("chat", self.model, "--date", "2025-06-28", *args, **kw)

    def test_reasoning_hidden_by_default_and_shown_on_request(self):
        hidden = self.chat("--prompt", "Hi", "--force-reply", ANALYSIS_THEN_FINAL)
        self.assertEqual(hidden.stdout, "Hello there\n")  # not a terminal: no "(thinking…)" either
        self.assertNotIn("reply cut", hidden.stderr)  # <|return|> ended it; <|end|> did not
        shown = self.chat("--prompt", "Hi", "--force-reply", ANALYSIS_THEN_FINAL, "--show-reasoning")
        self.assertEqual(shown.stdout, "[thinking] Thinking hard.\nHello there\n")
        straight = self.chat("--prompt", "Hi", "--show-reasoning",
                             "--force-reply", "<|channel|>final<|message|>Direct.<|return|>")
        self.assertEqual(straight.stdout, "Direct.\n")

    def test_prompt_carries_system_effort_and_date(self):
        p = self.chat("--prompt", "Hi", "--system", "Be brief.", "--reasoning-effort", "high", "--print-prompt",
                      "--force-reply", ANALYSIS_THEN_FINAL)
        [prompt] = prompts(p.stderr)
        self.assertTrue(prompt.startswith(
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: high\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"),
            prompt)
        self.assertTrue(prompt.endswith("<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
                                        "<|start|>user<|message|>Hi<|end|><|start|>assistant"), prompt)
        self.assertIn("Reasoning: medium", prompts(self.chat("--prompt", "Hi", "--print-prompt", "-n", "1").stderr)[0])

    def test_repl_drops_earlier_analysis(self):
        p = self.chat("--print-prompt", "--stats", "--force-reply", ANALYSIS_THEN_FINAL,
                      input="first\nsecond\n/reset\nthird\n/exit\n")
        self.assertEqual(p.stdout, "Hello there\n" * 3)
        first, second, third = prompts(p.stderr)
        self.assertEqual(second, first + "<|channel|>final<|message|>Hello there<|end|>"
                                         "<|start|>user<|message|>second<|end|><|start|>assistant")
        self.assertNotIn("Thinking hard", second)
        self.assertEqual(third, first.replace("first", "third"))
        self.assertEqual(len(reused(p.stderr)), 3)
        self.assertEqual(reused(p.stderr)[0], 0)
        # The second turn diverges where the first reply began (its analysis
        # is dropped): the whole first prompt is reused, on gpt_oss too,
        # whose sliding-window rings step back to the checkpoint taken after
        # that prompt (Session::checkpoint).
        first_prompt = len(json.loads(run("tokenize", self.model, first, "--json").stdout)["ids"])
        self.assertGreaterEqual(reused(p.stderr)[1], first_prompt - 1)
        self.assertEqual(reused(p.stderr)[2], 0)  # after /reset

    def test_token_limit_and_call_stop(self):
        p = self.chat("--prompt", "Hi", "-n", "3", "--force-reply", ANALYSIS_THEN_FINAL)
        self.assertIn("[reply cut at 3 tokens]", p.stderr)
        self.assertEqual(p.stdout, "\n")  # still in the analysis: nothing to show
        call = self.chat("--prompt", "Weather?", "--force-reply",
                         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                         "{\"city\":\"Paris\"}<|call|>never shown")
        self.assertEqual(call.stdout, "[tool call] get_weather({\"city\":\"Paris\"})\n\n")
        self.assertNotIn("reply cut", call.stderr)

    def test_sampled_reply_respects_the_limit(self):
        for n in (1, 5):
            p = self.chat("--prompt", "Hello", "-n", str(n), "--seed", "3", "--stats")
            decoded = int(re.search(r"decode: (\d+) tokens", p.stderr).group(1))
            self.assertLessEqual(decoded, n)
            self.assertTrue(decoded == n or "reply cut" not in p.stderr, p.stderr)
        p = self.chat("-n", "4", "--show-reasoning", input="hello\nagain\n/exit\n")
        self.assertEqual(p.returncode, 0)

    def test_harmony_flag_errors(self):
        self.assertFails(["chat", self.model, "--prompt", "x", "--no-think"], "--no-think", "--reasoning-effort low")
        p = run("chat", self.model, "--prompt", "x", "--reasoning-effort", "extreme", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertFails(["chat", self.model, "--prompt", "x", "--date", "June 28"], "YYYY-MM-DD")


class HarmonyChatOnQwen3Trunk(HarmonyChecks, TernTestCase):
    def setUp(self):
        super().setUp()
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q")
        harmony_tokenizer_files(self.path("hf"))
        run("install", self.path("hf"), "-o", self.path("m.tern"), "-q")
        self.model = self.path("m.tern")

    def test_unchanged_prefix_is_reused(self):
        # Straight to final: the re-rendered history extends what the session holds.
        reply = "<|channel|>final<|message|>Hi<|return|>"
        p = self.chat("--stats", "--force-reply", reply, input="one\ntwo\n/exit\n")
        first, second = reused(p.stderr)
        self.assertEqual(first, 0)
        self.assertGreater(second, 40)  # the whole first turn


class Qwen3Chat(TernTestCase):
    THINKING = "<think>\nhmm\n</think>\n\nHello<|im_end|>never shown"

    def setUp(self):
        super().setUp()
        run("synth", "--preset", "tiny", "-o", self.path("hf"), "-q")
        run("install", self.path("hf"), "-o", self.path("m.tern"), "-q")
        self.model = self.path("m.tern")

    def test_reply_is_raw_by_default_and_split_on_request(self):
        raw = run("chat", self.model, "--prompt", "Hi", "--force-reply", self.THINKING)
        self.assertEqual(raw.stdout, "<think>\nhmm\n</think>\n\nHello\n")
        shown = run("chat", self.model, "--prompt", "Hi", "--force-reply", self.THINKING, "--show-reasoning")
        self.assertEqual(shown.stdout, "[thinking] hmm\nHello\n")
        hidden = run("chat", self.model, "--prompt", "Hi", "--force-reply", self.THINKING, "--hide-reasoning")
        self.assertEqual(hidden.stdout, "Hello\n")

    def test_prompt_and_repl_context(self):
        p = run("chat", self.model, "--system", "Be brief.", "--no-think", "--print-prompt", "--stats",
                "--force-reply", self.THINKING, input="hello\nagain\n/exit\n")
        first, second = prompts(p.stderr)
        self.assertEqual(first, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
                                "<|im_start|>assistant\n<think>\n\n</think>\n\n")
        # Qwen3's template drops earlier thinking: the history holds the answer only.
        self.assertEqual(second, first[:-len("<think>\n\n</think>\n\n")] +
                         "Hello<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n"
                         "<think>\n\n</think>\n\n")
        a, b = reused(p.stderr)
        self.assertEqual(a, 0)
        self.assertGreater(b, 10)  # everything before the first reply's thinking block

    def test_sampled_chat_and_flag_errors(self):
        out = run("chat", self.model, "--prompt", "Hello there", "-n", "8", "--seed", "1").stdout
        self.assertTrue(len(out) > 0)
        self.assertFails(["chat", self.model, "--prompt", "x", "--reasoning-effort", "low"], "--reasoning-effort",
                         "gpt-oss")
        p = run("chat", self.model, "--prompt", "x", "--show-reasoning", "--hide-reasoning", check=False)
        self.assertNotEqual(p.returncode, 0)


if __name__ == "__main__":
    unittest.main()
