"""`tern serve` end to end over HTTP (standard library client): the OpenAI
endpoints, streaming, prefix reuse, batching that changes no token,
stop strings, authentication and every error path.

Outputs are compared with `tern generate --json` on the same model, token
for token: a request gives the same tokens served alone, beside other
requests in one batch, or under a small expert budget."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import TERN, Server, make_tiny_model, run  # noqa: E402

PROMPTS = [[1, 2, 3, 4, 5], [9, 8, 7], [100, 200, 300, 400, 500, 600, 700, 800], [42]]


def generate_tokens(model, tokens, n, *flags):
    p = run("generate", model, "--tokens", ",".join(map(str, tokens)), "-n", n, "--json", "--no-usage", *flags)
    return json.loads(p.stdout)["tokens"]


class ServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tern-serve-")
        cls.model = make_tiny_model(cls.tmp)
        cls.server = Server(cls.model, "--parallel", 4)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert code == 0, "".join(cls.server.log)

    def test_health_models_metrics(self):
        s = self.server
        self.assertEqual(s.request("GET", "/health")[:3:2], (200, {"status": "ok"}))
        status, _, models = s.request("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(models["object"], "list")
        self.assertEqual([m["id"] for m in models["data"]], ["tiny"])
        m = s.metrics()
        for name in ["tern_generated_tokens_total", "tern_tokens_per_second", "tern_expert_cache_hit_rate",
                     "tern_expert_bytes_read_total", "tern_queue_depth", "tern_resident_memory_bytes",
                     'tern_requests_total{outcome="rejected"}']:
            self.assertIn(name, m)
        self.assertGreater(m["tern_resident_memory_bytes"], 1 << 20)

    def test_chat_completion_shape_and_usage(self):
        status, _, r = self.server.post("/v1/chat/completions", {
            "model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6, "seed": 5})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["object"], "chat.completion")
        self.assertTrue(r["id"].startswith("chatcmpl-"))
        choice = r["choices"][0]
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertIsInstance(choice["message"]["content"], str)
        self.assertIn(choice["finish_reason"], ("stop", "length"))
        u = r["usage"]
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"])
        self.assertLessEqual(u["completion_tokens"], 6)
        self.assertIn("cached_tokens", u["prompt_tokens_details"])

    def test_stream_matches_non_stream(self):
        body = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 12, "seed": 11,
                "temperature": 1.0}
        _, _, whole = self.server.post("/v1/chat/completions", body)
        events = self.server.stream("/v1/chat/completions", {**body, "stream": True,
                                                            "stream_options": {"include_usage": True}})
        self.assertEqual(events[-1], "[DONE]")
        chunks = events[:-1]
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        self.assertEqual(text, whole["choices"][0]["message"]["content"])
        finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
        self.assertEqual(len(finals), 1)
        self.assertEqual(finals[0]["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"])
        usage = chunks[-1]
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"]["completion_tokens"], whole["usage"]["completion_tokens"])
        self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))

    def test_tokens_equal_generate_alone_and_batched(self):
        """Greedy and seeded sampling: the server's tokens equal `tern generate`'s, one request at a
        time and with four decoding together (threads), and under a small expert budget."""
        cases = []
        for i, p in enumerate(PROMPTS):
            cases.append(({"prompt": p, "max_tokens": 10, "temperature": 0, "return_tokens": True, "ignore_eos": True},
                          generate_tokens(self.model, p, 10, "--greedy", "--ignore-eos")))
            cases.append(({"prompt": p, "max_tokens": 10, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 7 + i,
                           "return_tokens": True, "ignore_eos": True},
                          generate_tokens(self.model, p, 10, "--temperature", 1.0, "--top-k", 0, "--top-p", 1.0,
                                          "--seed", 7 + i, "--ignore-eos")))
        for body, want in cases:  # one at a time
            status, _, r = self.server.post("/v1/completions", body)
            self.assertEqual(status, 200, r)
            self.assertEqual(r["choices"][0]["tokens"], want, body)
        results = [None] * len(cases)

        def one(i):
            results[i] = self.server.post("/v1/completions", cases[i][0])

        for _ in range(2):  # together
            threads = [threading.Thread(target=one, args=(i,)) for i in range(len(cases))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for (body, want), (status, _, r) in zip(cases, results):
                self.assertEqual(status, 200, r)
                self.assertEqual(r["choices"][0]["tokens"], want, body)
        small = Server(self.model, "--parallel", 3, "--ram", "16K", "--threads", 1, "--prefetch", 0)
        try:
            for (body, want) in cases[:4]:
                self.assertEqual(small.post("/v1/completions", body)[2]["choices"][0]["tokens"], want)
        finally:
            self.assertEqual(small.stop(), 0)

    def test_prefix_reuse_on_second_turn(self):
        history = [{"role": "system", "content": "You are terse."},
                   {"role": "user", "content": "What is a mixture of experts, in one line?"}]
        _, _, first = self.server.post("/v1/chat/completions", {"messages": history, "max_tokens": 8, "seed": 1})
        history.append({"role": "assistant", "content": first["choices"][0]["message"]["content"]})
        history.append({"role": "user", "content": "And why stream them from disk?"})
        _, _, second = self.server.post("/v1/chat/completions", {"messages": history, "max_tokens": 8, "seed": 1})
        cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        # Everything up to the first reply's end is reused (the first prompt, at least).
        self.assertGreaterEqual(cached, first["usage"]["prompt_tokens"])
        self.assertLess(cached, second["usage"]["prompt_tokens"])

    def test_stop_strings(self):
        body = {"prompt": [5, 6, 7, 8], "max_tokens": 24, "temperature": 0, "ignore_eos": True}
        _, _, full = self.server.post("/v1/completions", body)
        text = full["choices"][0]["text"]
        cut = next(i for i in range(len(text) // 3, len(text)) if text[i] not in "\ufffd ")
        stop = text[cut:cut + 2]
        want = text[:text.find(stop)]
        _, _, r = self.server.post("/v1/completions", {**body, "stop": [stop, "never-there"]})
        self.assertEqual(r["choices"][0]["text"], want)
        self.assertEqual(r["choices"][0]["finish_reason"], "stop")
        events = self.server.stream("/v1/completions", {**body, "stop": stop, "stream": True})
        self.assertEqual("".join(e["choices"][0]["text"] for e in events[:-1]), want)

    def test_bad_requests_are_json_errors(self):
        s = self.server
        cases = [
            (dict(raw="{not json"), 400, None),
            (dict(body=[1, 2]), 400, None),
            (dict(body={"messages": [{"role": "user", "content": 3}]}), 400, "messages[0].content"),
            (dict(body={"messages": [{"role": "user", "content": "x"}], "temperature": "warm"}), 400, "temperature"),
            (dict(body={"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}), 400, "max_tokens"),
            (dict(body={"messages": [{"role": "user", "content": "x"}], "model": "gpt-4o"}), 404, "model"),
            (dict(body={"messages": [{"role": "assistant", "content": "x"}, {"role": "system", "content": "late"}]}), 400, "messages"),
        ]
        for kw, status, param in cases:
            code, headers, r = s.request("POST", "/v1/chat/completions", **kw)
            self.assertEqual(code, status, (kw, r))
            self.assertTrue(headers["content-type"].startswith("application/json"))
            self.assertIsInstance(r["error"]["message"], str)
            self.assertEqual(r["error"]["param"], param, r)
        code, _, r = s.request("POST", "/v1/completions", {"prompt": [10 ** 9]})
        self.assertEqual(code, 400)
        code, _, r = s.request("GET", "/v1/nothing")
        self.assertEqual((code, r["error"]["type"]), (404, "invalid_request_error"))
        # The server still answers.
        self.assertEqual(s.request("GET", "/health")[0], 200)


class ServeLimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tern-serve-limits-")
        # "small" (hidden 256, 32 experts): 4000 tokens take seconds, so a
        # request is surely still running when the next one arrives.
        cls.model = make_tiny_model(cls.tmp, "small.tern", "small")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_api_key(self):
        s = Server(self.model, "--api-key", "sekret")
        try:
            body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
            code, headers, r = s.post("/v1/chat/completions", body)
            self.assertEqual(code, 401)
            self.assertEqual(r["error"]["code"], "invalid_api_key")
            self.assertEqual(s.post("/v1/chat/completions", body, headers={"Authorization": "Bearer nope"})[0], 401)
            self.assertEqual(s.request("GET", "/metrics")[0], 401)
            self.assertEqual(s.post("/v1/chat/completions", body, headers={"Authorization": "Bearer sekret"})[0], 200)
            self.assertEqual(s.request("GET", "/health")[0], 200)
            self.assertEqual(s.request("GET", "/api/state?key=sekret")[0], 200)
            self.assertEqual(s.request("GET", "/api/state")[0], 401)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_public_address_needs_a_key(self):
        p = run("serve", self.model, "--host", "0.0.0.0", "--port", "0", check=False, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("--api-key", p.stderr)

    def test_context_overflow_and_body_limit(self):
        s = Server(self.model, "--ctx", 64, "--max-body", "2K")
        try:
            code, _, r = s.post("/v1/completions", {"prompt": list(range(1, 80)), "max_tokens": 4})
            self.assertEqual(code, 400)
            self.assertEqual(r["error"]["code"], "context_length_exceeded")
            code, _, r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * 100}]})
            self.assertEqual((code, r["error"]["code"]), (400, "context_length_exceeded"))
            code, _, r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x" * 5000}]})
            self.assertEqual(code, 413)
            self.assertIn("exceeds", r["error"]["message"])
            # max_tokens beyond the context: generation stops at the context's end, finish_reason length.
            code, _, r = s.post("/v1/completions", {"prompt": list(range(1, 60)), "max_tokens": 500, "ignore_eos": True})
            self.assertEqual(code, 200, r)
            self.assertEqual(r["choices"][0]["finish_reason"], "length")
            self.assertEqual(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"], 64)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_kv_dir_keeps_sessions_across_restarts(self):
        kv = os.path.join(self.tmp, "kv")
        history = [{"role": "user", "content": "Remember this conversation, please."}]
        body = {"messages": history, "max_tokens": 6, "seed": 2}
        s = Server(self.model, "--kv-dir", kv, "--parallel", 2)
        try:
            first = s.post("/v1/chat/completions", body)[2]
        finally:
            self.assertEqual(s.stop(), 0)
        self.assertTrue(os.path.exists(os.path.join(kv, "session-0.tkv")))
        history.append({"role": "assistant", "content": first["choices"][0]["message"]["content"]})
        history.append({"role": "user", "content": "What did I ask?"})
        again = {"messages": history, "max_tokens": 6, "seed": 2}
        s = Server(self.model, "--kv-dir", kv, "--parallel", 2)
        try:
            second = s.post("/v1/chat/completions", again)[2]
        finally:
            self.assertEqual(s.stop(), 0)
        self.assertGreaterEqual(second["usage"]["prompt_tokens_details"]["cached_tokens"], first["usage"]["prompt_tokens"])
        # The restored KV gives the same reply as a fresh prefill of the whole conversation.
        fresh = Server(self.model, "--parallel", 1)
        try:
            want = fresh.post("/v1/chat/completions", again)[2]
        finally:
            self.assertEqual(fresh.stop(), 0)
        self.assertEqual(second["choices"][0]["message"]["content"], want["choices"][0]["message"]["content"])
        self.assertEqual(want["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
        # A corrupt file, a truncated one and one for another --ctx are ignored with a warning.
        path = os.path.join(kv, "session-0.tkv")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        with open(path, "wb") as f:
            f.write(bytes(data))
        with open(os.path.join(kv, "session-1.tkv"), "wb") as f:
            f.write(bytes(data[:100]))
        s = Server(self.model, "--kv-dir", kv, "--parallel", 2)
        try:
            r = s.post("/v1/chat/completions", again)[2]
            self.assertEqual(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
            self.assertEqual(r["choices"][0]["message"]["content"], want["choices"][0]["message"]["content"])
        finally:
            self.assertEqual(s.stop(), 0)
        log = "".join(s.log)
        self.assertIn("checksum mismatch", log)
        self.assertIn("truncated", log)
        s = Server(self.model, "--kv-dir", kv, "--ctx", 512)
        try:
            self.assertEqual(s.post("/v1/chat/completions", again)[2]["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
        finally:
            self.assertEqual(s.stop(), 0)
        self.assertIn("another model or --ctx", "".join(s.log))

    def test_queue_full_is_429_and_disconnect_cancels(self):
        s = Server(self.model, "--parallel", 1, "--max-queue", 0)
        try:
            c = s.connection()
            c.request("POST", "/v1/completions", body=json.dumps(
                {"prompt": [1, 2, 3], "max_tokens": 4000, "ignore_eos": True, "stream": True}),
                headers={"Content-Type": "application/json"})
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            r.read1(100)  # generation is running
            code, headers, body = s.post("/v1/completions", {"prompt": [4, 5], "max_tokens": 2})
            self.assertEqual(code, 429, body)
            self.assertEqual(body["error"]["code"], "rate_limit_exceeded")
            self.assertGreaterEqual(int(headers["retry-after"]), 1)
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
            deadline = time.time() + 30
            while time.time() < deadline:
                m = s.metrics()
                if m['tern_requests_total{outcome="cancelled"}'] >= 1:
                    break
                time.sleep(0.1)
            self.assertEqual(m['tern_requests_total{outcome="cancelled"}'], 1)
            self.assertLess(m["tern_generated_tokens_total"], 4000)
            self.assertGreaterEqual(m['tern_requests_total{outcome="rejected"}'], 1)
            # Free again.
            self.assertEqual(s.post("/v1/completions", {"prompt": [4, 5], "max_tokens": 2})[0], 200)
        finally:
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
