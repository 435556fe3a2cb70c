"""tools/bench_interference.py runs end to end on a small file: both kinds of
foreground work measured alone and beside the paced O_DIRECT reader, every
round reported, and the reader's achieved rate and guest CPU printed. Its
numbers are measured, never asserted (docs/RESULTS.md has them)."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench_interference.py")


class BenchInterference(unittest.TestCase):
    def setUp(self):
        # On the disk the build lives on: /tmp may be a tmpfs, which refuses O_DIRECT.
        self.tmp = tempfile.mkdtemp(prefix="tern-interference-", dir=os.environ.get("TERN_BUILD_DIR"))
        self.addCleanup(shutil.rmtree, self.tmp)
        self.file = os.path.join(self.tmp, "data.bin")
        with open(self.file, "wb") as f:
            f.write(os.urandom(64 << 20))
        try:
            os.close(os.open(self.file, os.O_RDONLY | os.O_DIRECT))
        except OSError as e:
            print(f"SKIPPED: this file system refuses O_DIRECT ({e})")
            self.skipTest("no O_DIRECT")

    def test_runs_and_reports_every_round(self):
        out = subprocess.run(["/usr/bin/python3", TOOL, self.file, "--rounds", "2", "--seconds", "0.3",
                              "--rate", "200M", "--cost-seconds", "1"], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| (alu|memory) .*$", out.stdout, re.M)}
        self.assertEqual(set(rows), {"alu", "memory"}, out.stdout)
        for row in rows.values():
            cells = [c.strip() for c in row.strip("|").split("|")]
            self.assertEqual(len(cells[1].split(",")), 2, row)  # alone, per round
            self.assertEqual(len(cells[2].split(",")), 2, row)  # beside the reads, per round
            self.assertRegex(cells[3], r"^\d+\.\d{3} \[\d+\.\d{3}, \d+\.\d{3}\]$")
        achieved = re.search(r"achieved ([\d, ]+) MiB/s", out.stdout)
        self.assertIsNotNone(achieved, out.stdout)
        self.assertTrue(all(float(x) > 0 for x in achieved.group(1).split(",")), out.stdout)
        self.assertIn("steal", out.stdout)


if __name__ == "__main__":
    unittest.main()
