"""The official `openai` npm SDK (tools/server-client/package.json, pinned) against a running
`tern serve`: chat, streaming with usage, a tools round trip, stop sequences, and the errors an
SDK user meets (400, 404, 401, 429) as the SDK's own exception types.

The tiny model has random weights, so the tools check starts the server with the hidden
--force-reply flag (every reply is that text's tokens, fed through the model as if sampled) and
--print-prompt (each rendered prompt on stderr, to see the tool result reach the model).
Needs node + npm and the npm registry; without them it prints SKIPPED."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import npm_packages  # noqa: E402
from serve_util import Server, make_tiny_model  # noqa: E402

CLIENTS = npm_packages.SOURCE_DIR / "tools" / "server-client"
PREFIX = npm_packages.cache_prefix("npm-server-client")
TOOL_REPLY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'


def sdk(server, check, key="none"):
    r = subprocess.run(["node", str(CLIENTS / "sdk_check.mjs"), str(PREFIX / "node_modules"),
                        f"http://127.0.0.1:{server.port}/v1", key, check],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"sdk_check {check} failed:\n{r.stdout}\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


class OpenAiSdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        npm_packages.install(CLIENTS / "package.json", PREFIX, ["node_modules/openai/package.json"])
        cls.tmp = tempfile.mkdtemp(prefix="tern-sdk-")
        cls.model = make_tiny_model(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_chat_stream_stop_and_errors(self):
        s = Server(self.model, "--api-key", "k1", "--parallel", 2)
        try:
            chat = sdk(s, "chat", "k1")
            self.assertEqual(chat["object"], "chat.completion")
            self.assertEqual(chat["message"]["role"], "assistant")
            self.assertEqual(chat["models"], ["tiny"])
            self.assertEqual(chat["usage"]["total_tokens"], chat["usage"]["prompt_tokens"] + chat["usage"]["completion_tokens"])

            stream = sdk(s, "stream", "k1")
            self.assertEqual(stream["text"], stream["whole"])
            self.assertIn(stream["finish"], ("stop", "length"))
            self.assertGreater(stream["usage"]["completion_tokens"], 0)
            self.assertGreater(stream["usage"]["prompt_tokens_details"]["cached_tokens"], 0)  # same prompt as before

            stop = sdk(s, "stop", "k1")
            self.assertEqual(stop["text"], stop["full"][:stop["full"].find(stop["stop"])])
            self.assertEqual(stop["finish"], "stop")

            errors = sdk(s, "errors", "k1")
            self.assertEqual(errors["bad"]["status"], 400)
            self.assertEqual(errors["bad"]["type"], "invalid_request_error")
            self.assertEqual((errors["unknown"]["status"], errors["unknown"]["code"]), (404, "model_not_found"))
            self.assertEqual((errors["noKey"]["status"], errors["noKey"]["code"]), (401, "invalid_api_key"))
        finally:
            self.assertEqual(s.stop(), 0)

    def test_busy_is_429(self):
        small = make_tiny_model(self.tmp, "small.tern", "small")  # slow enough to hold the slot
        s = Server(small, "--parallel", 1, "--max-queue", 0, env={"TERN_MODEL_ID": "small"})
        try:
            busy = subprocess.run(["node", str(CLIENTS / "sdk_check.mjs"), str(PREFIX / "node_modules"),
                                   f"http://127.0.0.1:{s.port}/v1", "none", "busy"],
                                  capture_output=True, text=True, timeout=300, env={**os.environ, "TERN_MODEL_ID": "small"})
            self.assertEqual(busy.returncode, 0, busy.stderr)
            b = json.loads(busy.stdout.strip().splitlines()[-1])["busy"]
            self.assertEqual((b["status"], b["code"]), (429, "rate_limit_exceeded"))
            self.assertGreaterEqual(int(b["retryAfter"]), 1)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_tools_round_trip(self):
        s = Server(self.model, "--force-reply", TOOL_REPLY, "--print-prompt")
        try:
            r = sdk(s, "tools")
            self.assertEqual(r["finish"], "tool_calls")
            self.assertEqual(len(r["calls"]), 1)
            call = r["calls"][0]
            self.assertEqual((call["type"], call["name"], call["arguments"]), ("function", "get_weather", {"city": "Paris"}))
            self.assertTrue(call["id"])
            self.assertIsNone(r["content"])
        finally:
            self.assertEqual(s.stop(), 0)
        log = "".join(s.log)
        prompts = log.split("[prompt]\n")[1:]
        self.assertEqual(len(prompts), 2, log)
        # The tools are offered in the system block, and the second prompt carries the call and its result.
        self.assertIn('"name": "get_weather"', prompts[0])
        self.assertIn("<tools>", prompts[0])
        self.assertIn('<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris"}}\n</tool_call>', prompts[1])
        self.assertIn('<tool_response>\n{"temperature_c":18}\n</tool_response>', prompts[1])


if __name__ == "__main__":
    unittest.main()
