"""`tern serve` with the harmony chat format (gpt-oss): the analysis channel comes back as
`reasoning_content`, the final channel as `content`, a message to `functions.NAME` as
`tool_calls` with finish_reason "tool_calls", and `reasoning_effort` reaches the prompt.

A tiny qwen3_moe trunk whose tokenizer carries GPT-OSS's special tokens speaks harmony (as in
tests/runtime/test_chat_cli.py); its weights are random, so replies are forced with the hidden
--force-reply flag (tokens fed through the model as if sampled) and prompts read back with
--print-prompt."""
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "runtime"))
from serve_util import Server, run  # noqa: E402
from test_chat_cli import ANALYSIS_THEN_FINAL, harmony_tokenizer_files  # noqa: E402

TOOL_CALL = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
             "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


class HarmonyServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tern-serve-harmony-")
        hf = os.path.join(cls.tmp, "hf")
        run("synth", "--preset", "tiny", "-o", hf, "-q")
        harmony_tokenizer_files(hf)
        cls.model = os.path.join(cls.tmp, "harmony.tern")
        run("install", hf, "-o", cls.model, "-q")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_reasoning_content_whole_and_streamed(self):
        s = Server(self.model, "--force-reply", ANALYSIS_THEN_FINAL, "--print-prompt")
        try:
            body = {"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                    "reasoning_effort": "high"}
            status, _, r = s.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, r)
            m = r["choices"][0]["message"]
            self.assertEqual((m["reasoning_content"], m["content"]), ("Thinking hard.", "Hello there"))
            self.assertEqual(r["choices"][0]["finish_reason"], "stop")
            events = s.stream("/v1/chat/completions", {**body, "stream": True})
            deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
            self.assertEqual("".join(d.get("reasoning_content", "") for d in deltas), "Thinking hard.")
            self.assertEqual("".join(d.get("content", "") for d in deltas), "Hello there")
            first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
            self.assertTrue(all(not d.get("reasoning_content") for d in deltas[first_content:]))
        finally:
            self.assertEqual(s.stop(), 0)
        prompts = re.findall(r"\[prompt\]\n(.*?)\n\[/prompt\]", "".join(s.log), re.S)
        self.assertEqual(len(prompts), 2)
        self.assertIn("Reasoning: high", prompts[0])
        self.assertIn("<|start|>developer<|message|># Instructions\n\nBe brief.\n\n", prompts[0])

    def test_tool_call(self):
        s = Server(self.model, "--force-reply", TOOL_CALL, "--print-prompt")
        try:
            status, _, r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Weather?"}],
                                                           "tools": TOOLS})
            self.assertEqual(status, 200, r)
            choice = r["choices"][0]
            self.assertEqual(choice["finish_reason"], "tool_calls")
            self.assertIsNone(choice["message"]["content"])
            self.assertEqual(choice["message"]["reasoning_content"], "Need the weather.")
            [call] = choice["message"]["tool_calls"]
            self.assertEqual((call["type"], call["function"]["name"], call["function"]["arguments"]),
                             ("function", "get_weather", '{"city":"Paris"}'))
            # The result goes back as a tool message and reaches the model as functions.get_weather's output.
            follow = {"messages": [{"role": "user", "content": "Weather?"}, choice["message"],
                                   {"role": "tool", "tool_call_id": call["id"], "content": "18 C"}], "tools": TOOLS}
            self.assertEqual(s.post("/v1/chat/completions", follow)[0], 200)
        finally:
            self.assertEqual(s.stop(), 0)
        prompts = re.findall(r"\[prompt\]\n(.*?)\n\[/prompt\]", "".join(s.log), re.S)
        # The tools are offered as the template's TypeScript namespace in the developer message.
        self.assertIn("# Tools\n\n## functions\n\nnamespace functions {\n\n// Weather in a city\n"
                      "type get_weather = (_: {\ncity: string,\n}) => any;\n\n} // namespace functions", prompts[0])
        self.assertIn("Calls to these tools must go to the commentary channel: 'functions'.", prompts[0])
        self.assertIn("to=functions.get_weather", prompts[1])
        self.assertIn("<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"18 C\"", prompts[1])


if __name__ == "__main__":
    unittest.main()
