#!/usr/bin/env python3
"""Install benchmark: how close `tern install` comes to the disk.

Each round, interleaved (the disk reads 0.45-1.2 GB/s depending on the hour,
so only rates taken in the same minutes are compared):
  1. the checkpoint's files are evicted from the page cache and read once
     with O_DIRECT in 16 MiB blocks: the disk's raw read rate;
  2. for each target format, the files are evicted again and
     `tern install --expert-quant FMT` runs; its rate is checkpoint bytes /
     wall time (the source read), and its peak RSS comes from wait4();
     `FMT:buffered` adds --buffered-reads (page cache instead of O_DIRECT),
     `FMT:avx2` (or :avx512, :portable) sets TERN_KERNELS for that install,
     `FMT@PATH` runs another tern binary (an A/B of two builds, interleaved);
  3. after each install, the files are evicted again and read with O_DIRECT
     while a second thread writes as many bytes as that install wrote to
     the output's directory the way the install's writer does (16 MiB
     buffered pwrites, writeback started per block, 64 MiB windows waited
     for and dropped, then fsync): the disk's rate for the install's I/O
     alone ("raw copy"). On this machine's virtual disk reads and writes
     share one budget (reads at 2.0 GB/s drop to 1.1 GB/s while 0.72 GB/s
     are written), so a same-disk install cannot reach the read-only rate.
     The probe is one reader and one writer at queue depth 1: it is a lower
     bound of the copy rate, and an install with deeper queues can beat it
     (ratio above 100%).
Prints a Markdown table for docs/RESULTS.md: medians over rounds of each
rate, of each install's ratio to the raw read and the raw copy of its own
round, and peak RSS.
Numbers are measured, never asserted in tests. With the output on the
source's disk (the default) the install's writes share that disk with its
reads; `--out` on another disk (or /dev/shm, standing in for one) shows the
read side alone.

  /usr/bin/python3 tools/bench_install.py HF_DIR [--formats q8_0,q4_k,q8_0:buffered,q4_k:avx2,q4_k@OLD_TERN]
      [--runs 3] [--threads N] [--out DIR] [--tern PATH] [--env TERN_KERNELS=portable ...]

--out is where installs are written (default: beside HF_DIR, the same disk, as
a user would); it is removed afterwards.

--read-limit MB/s caps the source disk's reads for the whole benchmark (this
process and its children move into a cgroup-v1 blkio group with
throttle.read_bps_device; root only): a stand-in for a slower disk, e.g. the
0.45-1.2 GB/s this kind of machine reads at other hours, to see whether the
install then keeps up with the disk.
"""
import argparse
import ctypes
import glob
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import ReadLimit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TERN = os.path.join(HERE, "..", "build", "release", "bin", "tern")
BLOCK = 16 << 20
MIB = 1 << 20


def checkpoint_files(hf):
    files = sorted(glob.glob(os.path.join(hf, "*.safetensors")))
    if not files:
        sys.exit(f"{hf}: no .safetensors files")
    return files


def evict(files):
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def raw_read(files):
    """Bytes/s of an O_DIRECT sequential read of every file (16 MiB blocks)."""
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    total = 0
    t0 = time.monotonic()
    for f in files:
        fd = os.open(f, os.O_RDONLY | os.O_DIRECT)
        try:
            while True:
                n = os.readv(fd, [buf])
                total += n
                if n < BLOCK:
                    break
        finally:
            os.close(fd)
    return total / (time.monotonic() - t0)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
SYNC_WRITE = 2  # SYNC_FILE_RANGE_WRITE
SYNC_WAIT_WRITE_WAIT = 7  # WAIT_BEFORE | WRITE | WAIT_AFTER
WINDOW = 64 << 20


def sync_file_range(fd, offset, length, flags):
    if _libc.sync_file_range(fd, offset, length, flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def raw_copy(files, out_dir, write_bytes):
    """Bytes/s of raw_read's read while another thread writes write_bytes
    into out_dir the way the install's writer does: 16 MiB pwrites, each
    one's writeback started at once, each 64 MiB window waited for and
    dropped from the page cache a window later, then fsync."""
    path = os.path.join(out_dir, f".bench-copy-{os.getpid()}")
    buf = mmap.mmap(-1, BLOCK)
    failure = []

    def write():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                at, previous = 0, None
                while at < write_bytes:
                    n = os.pwrite(fd, buf, at)
                    sync_file_range(fd, at, n, SYNC_WRITE)
                    at += n
                    if at % WINDOW == 0:
                        if previous is not None:
                            sync_file_range(fd, previous, WINDOW, SYNC_WAIT_WRITE_WAIT)
                            os.posix_fadvise(fd, previous, WINDOW, os.POSIX_FADV_DONTNEED)
                        previous = at - WINDOW
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            failure.append(e)

    t0 = time.monotonic()
    writer = threading.Thread(target=write)
    writer.start()
    try:
        read_rate = raw_read(files)
    finally:
        writer.join()
        seconds = time.monotonic() - t0
        if os.path.exists(path):
            os.unlink(path)
    if failure:
        sys.exit(f"raw copy probe: {failure[0]}")
    size = sum(os.path.getsize(f) for f in files)
    return min(read_rate, size / seconds)


def tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names)


def run_install(cmd, env):
    """(seconds, peak RSS bytes) of one install."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.monotonic() - t0
    out, err = p.stdout.read(), p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"install failed ({p.returncode}): {' '.join(cmd)}\n{out.decode()}\n{err.decode()}")
    return seconds, usage.ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hf")
    ap.add_argument("--formats", default="q8_0,q4_k")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--tern", default=os.environ.get("TERN_BINARY", DEFAULT_TERN))
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the installs")
    ap.add_argument("--read-limit", type=float, help="cap the source disk's reads at this many MB/s (blkio cgroup)")
    a = ap.parse_args()
    files = checkpoint_files(a.hf)
    if a.read_limit:
        with ReadLimit(files[0], a.read_limit):
            return bench(a, files)
    return bench(a, files)


def bench(a, files):
    size = sum(os.path.getsize(f) for f in files)
    formats = a.formats.split(",")
    out_dir = a.out or os.path.dirname(os.path.abspath(a.hf.rstrip("/")))
    target = os.path.join(out_dir, f".bench-install-{os.getpid()}.tern")
    env = dict(os.environ, **dict(e.split("=", 1) for e in a.env))

    def per_format():
        return {f: [] for f in formats}

    raw, rate, ratio, rss = [], per_format(), per_format(), per_format()
    copy, copy_ratio, written = per_format(), per_format(), per_format()
    try:
        for _ in range(a.runs):
            evict(files)
            raw.append(raw_read(files))
            for fmt in formats:
                evict(files)
                spec, _, binary = fmt.partition("@")
                name, *modes = spec.split(":")
                cmd = [binary or a.tern, "install", a.hf, "-o", target, "--force", "-q", "--expert-quant", name]
                run_env = dict(env)
                for mode in modes:
                    if mode == "buffered":
                        cmd.append("--buffered-reads")
                    elif mode in ("avx2", "portable", "avx512"):
                        run_env["TERN_KERNELS"] = mode
                    else:
                        sys.exit(f"{fmt}: unknown mode '{mode}' (buffered, avx2, avx512, portable)")
                if a.threads:
                    cmd += ["--threads", str(a.threads)]
                seconds, peak = run_install(cmd, run_env)
                written[fmt].append(tree_bytes(target))
                shutil.rmtree(target, ignore_errors=True)
                rate[fmt].append(size / seconds)
                ratio[fmt].append(size / seconds / raw[-1])
                rss[fmt].append(peak)
                evict(files)
                copy[fmt].append(raw_copy(files, out_dir, written[fmt][-1]))
                copy_ratio[fmt].append(size / seconds / copy[fmt][-1])
    finally:
        shutil.rmtree(target, ignore_errors=True)

    def med(v):
        return statistics.median(v)  # of an even count: the mean of the middle two

    print(f"checkpoint: {a.hf}, {size / MIB:.0f} MiB in {len(files)} file(s); output on {out_dir}; "
          f"threads {a.threads or os.cpu_count()}; {' '.join(a.env)}; "
          f"{f'reads capped at {a.read_limit:.0f} MB/s; ' if a.read_limit else ''}median of {a.runs} interleaved rounds "
          f"(raw read rates: {', '.join(f'{r / MIB:.0f}' for r in raw)} MiB/s)")
    print("| target | raw O_DIRECT read | install (source read) | install / raw read | "
          "written / read | raw copy (read + that write) | install / raw copy | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")

    def rounds(v):
        return f"{100 * med(v):.0f}% (rounds: {', '.join(f'{100 * r:.0f}%' for r in v)})"

    for fmt in formats:
        print(f"| {fmt} | {med(raw) / MIB:.0f} MiB/s | {med(rate[fmt]) / MIB:.0f} MiB/s | {rounds(ratio[fmt])} | "
              f"{med(written[fmt]) / size:.2f} | {med(copy[fmt]) / MIB:.0f} MiB/s | {rounds(copy_ratio[fmt])} | "
              f"{med(rss[fmt]) / MIB:.0f} MiB |")


if __name__ == "__main__":
    main()
