"""npm-installs a tools/ folder's pinned package.json into a cache folder (once), for tests that
compare Tern with JavaScript clients or references. Without node/npm or the registry the calling
test prints SKIPPED (CTest's skip marker)."""
import json
import os
import shutil
import subprocess
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("TERN_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def cache_prefix(name):
    """The folder npm installs into: $TERN_CACHE_DIR/NAME, else .cache/NAME in the source tree."""
    root = Path(os.environ["TERN_CACHE_DIR"]) if os.environ.get("TERN_CACHE_DIR") else SOURCE_DIR / ".cache"
    return root / name


def skip(reason):
    # CTest treats a line starting with SKIPPED: as a skipped test.
    print(f"SKIPPED: {reason}", flush=True)
    raise unittest.SkipTest(reason)


def install(package_json, prefix, markers):
    """Installs package_json's dependencies into prefix unless the same package.json and every
    marker file are already there; skips the test when that cannot be done."""
    if not shutil.which("node") or not shutil.which("npm"):
        skip("node/npm not found")
    package_json, prefix = Path(package_json), Path(prefix)
    wanted = json.loads(package_json.read_text())
    installed = prefix / "package.json"
    markers = [prefix / m for m in markers]
    if installed.exists() and json.loads(installed.read_text()) == wanted and all(m.exists() for m in markers):
        return
    prefix.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(package_json, installed)
    try:
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(prefix)],
                           capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        skip("npm install timed out")
    if r.returncode != 0 or not all(m.exists() for m in markers):
        installed.unlink(missing_ok=True)  # so the next run retries
        skip(f"npm install failed: {r.stderr.strip()[-500:]}")
