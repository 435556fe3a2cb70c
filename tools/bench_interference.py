#!/usr/bin/env python3
"""What reading from disk costs the cores, with nothing to wait for.

On a virtual machine the host's I/O path can run on the physical cores the
vCPUs run on, so reads slow compute even when the guest spends almost no CPU
on them (docs/RESULTS.md, 2026-12-07). This tool measures it for two kinds of
foreground work, each on every core in its own process:

  alu     SHA-256 over a 16 KiB buffer (stays in the caches: no memory traffic)
  memory  NumPy copies of a 512 MiB array (memory-bandwidth bound, like decode)

each alone and beside a background reader (O_DIRECT, 4 MiB blocks at random
places, 8 in flight, paced to --rate; tools/bench_engine.py's
BackgroundReader), rounds interleaved, and prints per round and the paired
ratio (geometric mean, 95% CI), the reader's achieved rate, and the guest's
own CPU spent on the reading (user, system, irq, softirq and steal shares of
/proc/stat over --cost-seconds of the reader alone).

  /usr/bin/python3 tools/bench_interference.py FILE [--rate 1500M] [--rounds 3] [--seconds 4] [--cost-seconds 5]

FILE: a large file on the disk the models live on (an installed model's
experts.bin). Numbers are measured, never asserted in tests.
"""
import argparse
import hashlib
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import BackgroundReader, paired_interval, parse_size  # noqa: E402


def alu(seconds):
    """Bytes hashed per second by one process."""
    buf, h, n = os.urandom(16 << 10), hashlib.sha256(), 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(64):
            h.update(buf)
        n += 64 * len(buf)
    return n / (time.monotonic() - t0)


def memory(seconds):
    """Bytes moved per second (read + write) by one process copying 512 MiB."""
    import numpy as np
    a = np.ones(1 << 26)
    b = np.empty_like(a)
    np.copyto(b, a)  # fault the pages in before timing
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        np.copyto(b, a)
        n += 2 * a.nbytes
    return n / (time.monotonic() - t0)


def on_every_core(fn, seconds):
    cores = os.cpu_count() or 1
    with multiprocessing.Pool(cores) as pool:
        return sum(pool.map(fn, [seconds] * cores))


def cpu_ticks():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    return dict(zip(names, fields))


def guest_cost(path, rate, seconds=5):
    """The guest's CPU share (of all cores) while only the reader runs."""
    with BackgroundReader(path, rate) as reader:
        time.sleep(0.5)
        t0 = cpu_ticks()
        time.sleep(seconds)
        t1 = cpu_ticks()
    d = {k: t1[k] - t0[k] for k in t0}
    total = sum(d.values()) or 1
    return {k: d[k] / total for k in ("user", "system", "softirq", "irq", "steal")}, reader


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--rate", default="1500M", help="background read rate, bytes/s (K/M/G suffixes)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4, help="each foreground measurement")
    ap.add_argument("--cost-seconds", type=float, default=5, help="the reader alone, for its guest CPU")
    a = ap.parse_args()
    rate = parse_size(a.rate)
    work = {"alu": alu, "memory": memory}
    results = {(w, bg): [] for w in work for bg in (False, True)}
    achieved = []
    for r in range(a.rounds):
        # Alternate which condition goes first, so neither always follows the other.
        for bg in ((False, True) if r % 2 == 0 else (True, False)):
            for name, fn in work.items():
                if bg:
                    with BackgroundReader(a.file, rate) as reader:
                        time.sleep(0.5)
                        results[(name, bg)].append(on_every_core(fn, a.seconds))
                    achieved.append(reader.achieved)
                else:
                    results[(name, bg)].append(on_every_core(fn, a.seconds))
    share, reader = guest_cost(a.file, rate, a.cost_seconds)
    print(f"file {a.file}; {os.cpu_count()} cores; background O_DIRECT reads paced to {rate / 2**20:.0f} MiB/s "
          f"(achieved {', '.join(f'{x / 2**20:.0f}' for x in achieved)} MiB/s); {a.rounds} rounds of {a.seconds:g} s")
    print(f"guest CPU while only the reader ran ({reader.achieved / 2**20:.0f} MiB/s), share of all cores: "
          + ", ".join(f"{k} {100 * v:.1f}%" for k, v in share.items())
          + f"; the reader process {reader.cpu_seconds:.2f} s")
    print("| work, every core | alone (rounds) | beside the reads (rounds) | paired ratio: geometric mean [95% CI] |")
    print("| --- | --- | --- | --- |")
    unit = {"alu": ("SHA-256 MB/s", 1e6), "memory": ("copy GB/s", 1e9)}
    for name in work:
        label, scale = unit[name]
        alone, beside = results[(name, False)], results[(name, True)]
        ci = paired_interval([b / x for b, x in zip(beside, alone)])
        ci_text = f"{ci[0]:.3f} [{ci[1]:.3f}, {ci[2]:.3f}]" if ci else "-"
        print(f"| {name} ({label}) | {', '.join(f'{x / scale:.1f}' for x in alone)} | "
              f"{', '.join(f'{x / scale:.1f}' for x in beside)} | {ci_text} |")


if __name__ == "__main__":
    main()
