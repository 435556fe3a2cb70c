#!/usr/bin/env python3
"""Server benchmark: what batching concurrent requests and prefix reuse buy, measured through
`tern serve`'s HTTP API as a client sees it, with the variants interleaved in the same run.

1. Aggregate throughput vs concurrency. For each round and each level C in --levels (default
   1,2,4,8), C clients each send --requests completions at once (distinct random token
   prompts of --prompt-tokens, --tokens generated, end-of-sequence ignored, greedy) to a server
   started with --parallel max(levels); aggregate tok/s = all generated tokens / wall time of
   the level. Medians over --rounds; the ratio to C=1 is what batching buys (each expert read
   or multiplied once per step serves every request routed to it).
2. Time to first token on a multi-turn chat, with and without prefix reuse: a system prompt of
   --system-tokens words, then --turns user turns; each turn is sent twice, interleaved,
   once as is (the kept session holds the history) and once with "cache_prompt": false (the
   whole conversation is prefilled); TTFT is the time to the first streamed chunk that holds
   text, medians per turn.

  /usr/bin/python3 tools/bench_server.py MODEL.tern [--ram 256M] [--levels 1,2,4,8]
      [--requests 2] [--tokens 32] [--prompt-tokens 32] [--rounds 3] [--turns 4] [--threads N]
      [--server-args '...']

The page cache is not dropped between levels (the server's reads are O_DIRECT by default, so
the expert cache is what serves hits). Prints Markdown tables for docs/RESULTS.md. Numbers are
measured, never asserted in tests.
"""
import argparse
import http.client
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TERN = os.path.join(HERE, "..", "build", "release", "bin", "tern")


class Server:
    def __init__(self, tern, model, args):
        self.proc = subprocess.Popen([tern, "serve", model, "--port", "0", "--no-usage", *args],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.port, self.log = None, []
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            raise SystemExit("tern serve did not start:\n" + "".join(self.log))
        threading.Thread(target=lambda: [self.log.append(x) for x in self.proc.stderr], daemon=True).start()

    def post(self, path, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = json.loads(r.read())
        c.close()
        if r.status != 200:
            raise SystemExit(f"HTTP {r.status}: {data}")
        return data

    def first_text_seconds(self, body):
        """Streams a chat request; returns (seconds to the first chunk with text, whole reply)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        t0 = time.perf_counter()
        c.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        first, text, buf = None, "", b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                if not ev.startswith(b"data: ") or ev == b"data: [DONE]":
                    continue
                j = json.loads(ev[6:])
                if j["choices"]:
                    d = j["choices"][0]["delta"]
                    piece = d.get("content", "") + d.get("reasoning_content", "")
                    if piece and first is None:
                        first = time.perf_counter() - t0
                    text += d.get("content", "")
        c.close()
        return first if first is not None else time.perf_counter() - t0, text

    def metrics(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", "/metrics")
        out = {}
        for line in c.getresponse().read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        c.close()
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def throughput(server, level, requests, tokens, prompt_tokens, rng):
    bodies = [[{"prompt": [rng.randint(10, 20000) for _ in range(prompt_tokens)], "max_tokens": tokens,
                "temperature": 0, "ignore_eos": True, "cache_prompt": False} for _ in range(requests)]
              for _ in range(level)]
    generated = [0] * level
    m0 = server.metrics()

    def client(i):
        for b in bodies[i]:
            generated[i] += server.post("/v1/completions", b)["usage"]["completion_tokens"]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(level)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    m1 = server.metrics()
    steps = m1["tern_forward_steps_total"] - m0["tern_forward_steps_total"]
    rows = m1["tern_batch_rows_total"] - m0["tern_batch_rows_total"]
    read = m1["tern_expert_bytes_read_total"] - m0["tern_expert_bytes_read_total"]
    lookups = m1["tern_expert_cache_lookups_total"] - m0["tern_expert_cache_lookups_total"]
    hits = m1["tern_expert_cache_hits_total"] - m0["tern_expert_cache_hits_total"]
    total = sum(generated)
    return {"tok_s": total / wall, "tokens": total, "wall": wall, "mean_batch": rows / steps if steps else 0,
            "mib_per_token": read / total / (1 << 20), "hit_rate": hits / lookups if lookups else 0,
            "rss": m1["tern_resident_memory_bytes"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tern", default=DEFAULT_TERN)
    ap.add_argument("--ram", default=None)
    ap.add_argument("--levels", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--system-tokens", type=int, default=400)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--server-args", default="")
    ap.add_argument("--skip-ttft", action="store_true")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    args = ["--parallel", str(max(levels))] + shlex.split(a.server_args)
    if a.ram:
        args += ["--ram", a.ram]
    if a.threads:
        args += ["--threads", str(a.threads)]
    server = Server(a.tern, a.model, args)
    print("server:", "".join(server.log).strip().replace("\n", " | "), file=sys.stderr)
    rng = random.Random(1)
    try:
        throughput(server, 1, 1, 4, a.prompt_tokens, rng)  # warm-up
        results = {c: [] for c in levels}
        for r in range(a.rounds):
            for c in (levels if r % 2 == 0 else list(reversed(levels))):
                res = throughput(server, c, a.requests, a.tokens, a.prompt_tokens, rng)
                results[c].append(res)
                print(f"round {r + 1} level {c}: {res['tok_s']:.2f} tok/s, mean batch {res['mean_batch']:.2f}, "
                      f"{res['mib_per_token']:.1f} MiB/token, hit {100 * res['hit_rate']:.1f}%", file=sys.stderr)
        med = {c: {k: statistics.median(x[k] for x in results[c]) for k in results[c][0]} for c in levels}
        print(f"\nAggregate throughput, {a.requests} requests per client, {a.prompt_tokens}-token prompts, "
              f"{a.tokens} tokens each, medians of {a.rounds} rounds (server args: {' '.join(args)})\n")
        print("| concurrent requests | aggregate tok/s | vs 1 | rows per forward step (prompt tokens included) | expert MiB read per token | hit rate | RSS |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        base = med[levels[0]]["tok_s"]
        for c in levels:
            m = med[c]
            print(f"| {c} | {m['tok_s']:.2f} | {m['tok_s'] / base:.2f}x | {m['mean_batch']:.2f} | "
                  f"{m['mib_per_token']:.1f} | {100 * m['hit_rate']:.1f}% | {m['rss'] / (1 << 20):.0f} MiB |")

        if not a.skip_ttft:
            words = " ".join(rng.choice(["expert", "routing", "cache", "disk", "token", "layer", "budget", "read"])
                             for _ in range(a.system_tokens))
            history = [{"role": "system", "content": "Background: " + words}]
            rows = []
            for t in range(a.turns):
                history.append({"role": "user", "content": f"Question {t + 1}: what happens to the experts now?"})
                body = {"messages": history, "max_tokens": 8, "temperature": 0}
                cold, warm = [], []
                for k in range(a.rounds):
                    order = [True, False] if k % 2 == 0 else [False, True]
                    for reuse in order:
                        secs, text = server.first_text_seconds({**body, "cache_prompt": reuse})
                        (warm if reuse else cold).append(secs)
                _, reply = server.first_text_seconds(body)
                rows.append((t + 1, statistics.median(warm), statistics.median(cold)))
                history.append({"role": "assistant", "content": reply})
            print(f"\nTime to first token on a {a.turns}-turn chat (system prompt of {a.system_tokens} words), "
                  f"medians of {a.rounds}, interleaved\n")
            print("| turn | with prefix reuse | without (cache_prompt false) | speed-up |")
            print("| --- | --- | --- | --- |")
            for t, w, c in rows:
                print(f"| {t} | {w * 1000:.0f} ms | {c * 1000:.0f} ms | {c / w:.1f}x |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
