"""Starting `tern serve` for a test and talking to it (standard library only)."""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from tern_cli import TERN, run  # noqa: E402,F401


def make_tiny_model(tmp, name="tiny.tern", preset="tiny"):
    """Synthesizes and installs a qwen3_moe preset into tmp; returns its .tern path."""
    hf = os.path.join(tmp, name + ".hf")
    args = ["synth", "--arch", "qwen3_moe", "--preset", preset, "-o", hf, "--seed", "3"]
    run(*args)
    out = os.path.join(tmp, name)
    run("install", hf, "-o", out)
    return out


class Server:
    """A `tern serve` process on a free port; stop() ends it (SIGTERM) and returns its exit code."""

    def __init__(self, model, *args, env=None):
        self.proc = subprocess.Popen([TERN, "serve", model, "--port", "0", "--no-usage", *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        self.log = []
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise AssertionError("tern serve did not start:\n" + "".join(self.log) + self.proc.stderr.read())
        # Keep draining stderr so the server never blocks on a full pipe.
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=60)
        finally:
            self._drain.join(timeout=5)
            self.proc.stdout.close()
            self.proc.stderr.close()

    def connection(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, raw=None):
        """Returns (status, headers dict, parsed JSON or text)."""
        c = self.connection()
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        text = r.read().decode("utf-8")
        c.close()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        return r.status, {k.lower(): v for k, v in r.getheaders()}, parsed

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def stream(self, path, body, headers=None):
        """POSTs a streaming request; returns the list of parsed SSE data payloads ("[DONE]" kept as a string)."""
        c = self.connection()
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type").startswith("text/event-stream")
        events = []
        buf = b""
        while True:
            chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                for line in ev.decode("utf-8").splitlines():
                    if line.startswith("data: "):
                        d = line[6:]
                        events.append(d if d == "[DONE]" else json.loads(d))
            if events and events[-1] == "[DONE]":
                break
        c.close()
        return events

    def metrics(self):
        status, _, text = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out
