"""Shared helpers for end-to-end tests of the `tern` binary."""
import os
import shutil
import subprocess
import tempfile
import unittest

TERN = os.environ.get("TERN_BINARY", "tern")
SOURCE_DIR = os.environ.get("TERN_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


def run(*args, check=True, timeout=600, **kw):
    """Runs tern with args; returns CompletedProcess (text mode)."""
    p = subprocess.run([TERN, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"tern {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


class TernTestCase(unittest.TestCase):
    """A test case with a fresh temporary directory in self.tmp."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tern-e2e-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def assertFails(self, args, *needles, code=1):
        p = run(*args, check=False)
        self.assertEqual(p.returncode, code, f"exit code for {args}: {p.stderr}")
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertNotIn("internal error", p.stderr)
        return p
