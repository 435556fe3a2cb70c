"""The dashboard in headless Chromium (Debian's `chromium`, driven by the pinned playwright-core
from tools/server-client/package.json): the page loads from the binary with no other origin
contacted, a chat message streams a reply with its stats, the expert grid lights up from the
server's routing feed, the cache and I/O panel fills in; screenshots are saved and checked.

Needs chromium, node + npm and the npm registry; without them it prints SKIPPED."""
import json
import os
import shutil
import struct
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
CHROMIUM = next((p for p in ["/usr/lib/chromium/chromium", shutil.which("chromium") or ""] if p and os.path.exists(p)), None)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


class DashboardTest(unittest.TestCase):
    def test_dashboard_chat_and_live_grid(self):
        if not CHROMIUM:
            npm_packages.skip("chromium not found (apt-get install chromium)")
        npm_packages.install(CLIENTS / "package.json", PREFIX, ["node_modules/playwright-core/package.json"])
        tmp = tempfile.mkdtemp(prefix="tern-dashboard-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        model = make_tiny_model(tmp)
        out = Path(os.environ.get("TERN_BUILD_DIR", tmp)) / "dashboard-screenshots"
        out.mkdir(parents=True, exist_ok=True)
        s = Server(model, "--ram", "32K", "--no-preload")  # half the experts: misses, reads and residency to show
        try:
            r = subprocess.run(["node", str(CLIENTS / "dashboard_check.mjs"), str(PREFIX / "node_modules"),
                                f"http://127.0.0.1:{s.port}", CHROMIUM, str(out)],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}")
            res = json.loads(r.stdout.strip().splitlines()[-1])
        finally:
            self.assertEqual(s.stop(), 0)
        self.assertIn("tiny", res["model"])
        self.assertIn("2 MoE layers × 8 experts", res["model"])
        self.assertEqual(res["before"]["lit"], 0)
        self.assertEqual(res["before"]["cells"], 16)
        self.assertGreater(res["after"]["lit"], 0)
        self.assertIn("tok/s", res["stats"])
        self.assertIn("hit rate", res["stats"])
        self.assertIn("prompt", res["stats"])
        self.assertEqual(res["external"], [], "the page must not contact another origin")
        self.assertEqual(res["consoleErrors"], [])
        io = res["io"]
        self.assertIn("KiB", io["expert cache used / budget"])
        self.assertIn("MiB", io["resident memory (RSS)"])
        for name in ["dashboard-loaded.png", "dashboard-reply.png"]:
            path = out / name
            self.assertGreater(path.stat().st_size, 10_000, name)
            self.assertEqual(png_size(path), (1366, 800))
        print(f"screenshots in {out}")


if __name__ == "__main__":
    unittest.main()
