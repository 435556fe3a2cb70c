"""64 concurrent clients against `tern serve` on the tiny model for a bounded time (LOAD_SECONDS,
default 8): streamed and whole chat and completion requests, some abandoned mid-stream. Checks:
no crash, every completed response well-formed, every refusal a 429 with Retry-After and an
OpenAI error body, the server's rejected count equals the 429s seen, the queue never exceeds
--max-queue, and resident memory stays flat after warm-up (reported; bounded outside the
sanitizer build, whose allocator quarantine grows by design). Timing is never asserted."""
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, make_tiny_model  # noqa: E402

CLIENTS = 64
PARALLEL = 4
MAX_QUEUE = 8
SECONDS = float(os.environ.get("LOAD_SECONDS", "8"))
SANITIZED = "asan" in os.environ.get("TERN_BUILD_DIR", "")


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class LoadTest(unittest.TestCase):
    def test_64_clients(self):
        tmp = tempfile.mkdtemp(prefix="tern-load-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        model = make_tiny_model(tmp)
        s = Server(model, "--parallel", PARALLEL, "--max-queue", MAX_QUEUE, "--ram", "32K")
        lock = threading.Lock()
        counts = {"ok": 0, "rejected": 0, "abandoned": 0}
        problems = []
        stop_at = time.time() + SECONDS

        def client(seed):
            rng = random.Random(seed)
            while time.time() < stop_at:
                chat = rng.random() < 0.5
                body = {"max_tokens": rng.randint(4, 48), "seed": rng.randint(0, 1000)}
                if chat:
                    body["messages"] = [{"role": "user", "content": f"client {seed} says hello {rng.randint(0, 9)}"}]
                else:
                    body["prompt"] = [rng.randint(1, 500) for _ in range(rng.randint(1, 30))]
                path = "/v1/chat/completions" if chat else "/v1/completions"
                try:
                    kind = rng.random()
                    if kind < 0.1:  # abandon a stream after its first bytes
                        c = s.connection(timeout=60)
                        c.request("POST", path, body=json.dumps({**body, "stream": True}),
                                  headers={"Content-Type": "application/json"})
                        r = c.getresponse()
                        if r.status == 200:
                            r.read1(64)
                            c.close()
                            with lock:
                                counts["abandoned"] += 1
                            continue
                        status, headers, payload = r.status, {k.lower(): v for k, v in r.getheaders()}, json.loads(r.read())
                        c.close()
                    elif kind < 0.5:
                        c = s.connection(timeout=120)
                        c.request("POST", path, body=json.dumps({**body, "stream": True}),
                                  headers={"Content-Type": "application/json"})
                        r = c.getresponse()
                        status, headers = r.status, {k.lower(): v for k, v in r.getheaders()}
                        raw = r.read().decode("utf-8")
                        c.close()
                        if status == 200:
                            events = [line[6:] for line in raw.split("\n") if line.startswith("data: ")]
                            if events[-1] != "[DONE]":
                                raise AssertionError(f"stream without [DONE]: {raw[-200:]}")
                            chunks = [json.loads(e) for e in events[:-1]]
                            finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
                            if len(finals) != 1:
                                raise AssertionError(f"{len(finals)} final chunks")
                            payload = chunks[-1]
                        else:
                            payload = json.loads(raw)
                    else:
                        status, headers, payload = s.post(path, body)
                        if status == 200:
                            ch = payload["choices"][0]
                            u = payload["usage"]
                            if ch["finish_reason"] not in ("stop", "length") or \
                                    u["total_tokens"] != u["prompt_tokens"] + u["completion_tokens"] or \
                                    u["completion_tokens"] > body["max_tokens"]:
                                raise AssertionError(f"malformed response {payload}")
                            if not isinstance(ch["message"]["content"] if chat else ch["text"], str):
                                raise AssertionError(f"no text in {payload}")
                    with lock:
                        if status == 200:
                            counts["ok"] += 1
                        elif status == 429:
                            counts["rejected"] += 1
                            if payload["error"]["code"] != "rate_limit_exceeded" or int(headers["retry-after"]) < 1:
                                problems.append(f"bad 429: {headers} {payload}")
                        else:
                            problems.append(f"status {status}: {payload}")
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    with lock:
                        problems.append(f"{type(e).__name__}: {e} (kind {kind:.2f}, {path}) "
                                        f"{traceback.format_exc(limit=-3)}")
                    return

        rss, queue = [], []

        def sampler():
            start = time.time()
            while time.time() < stop_at:
                rss.append((time.time() - start, rss_bytes(s.proc.pid)))
                try:
                    queue.append(s.metrics()["tern_queue_depth"])
                except Exception:  # noqa: BLE001 - a busy server may refuse a connection; sample again
                    pass
                time.sleep(0.25)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        watch = threading.Thread(target=sampler)
        for t in threads + [watch]:
            t.start()
        for t in threads + [watch]:
            t.join()
        time.sleep(0.5)  # abandoned streams are noticed at their next write
        m = s.metrics()
        code = s.stop()
        self.assertEqual(code, 0, "".join(s.log[-20:]))
        self.assertEqual(problems, [])
        self.assertGreater(counts["ok"], 0)
        self.assertEqual(m['tern_requests_total{outcome="rejected"}'], counts["rejected"])
        self.assertLessEqual(max(queue), MAX_QUEUE)
        warm = [b for t, b in rss if t >= SECONDS / 4]
        growth = (max(warm) - min(warm)) / 2 ** 20 if warm else 0
        cancelled = int(m['tern_requests_total{outcome="cancelled"}'])
        print(f"load: {CLIENTS} clients for {SECONDS:.0f} s, --parallel {PARALLEL} --max-queue {MAX_QUEUE}: "
              f"{counts['ok']} completed, {counts['rejected']} got 429, {counts['abandoned']} abandoned, "
              f"{cancelled} cancelled by the server; "
              f"max queue {int(max(queue))}; RSS after warm-up {min(warm) / 2**20:.1f}-{max(warm) / 2**20:.1f} MiB "
              f"(growth {growth:.1f} MiB)")
        if not SANITIZED:
            self.assertLess(growth, 32, "resident memory kept growing under load")


if __name__ == "__main__":
    unittest.main()
