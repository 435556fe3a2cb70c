#!/usr/bin/env python3
"""Engine benchmark: decode and prefill of an installed model with experts
streamed from disk, measured as a user would see it, with A/B variants
interleaved in the same invocation.

Per round, for each variant in turn: the model's files are evicted from the
page cache, `tern generate` runs (inside a cgroup-v1 memory limit that counts
page cache too, when --cap is given or can be derived, so the page cache cannot
hide reads), and its --json statistics are collected. The disk's O_DIRECT read
bandwidth is measured in the same run (before every round). Prints a Markdown
table for docs/RESULTS.md with the medians over rounds:

  decode / prefill tok/s, time to first token, hit rate, prefetch recall
  (cache + prefetch hits) and waste, expert MiB read per decode token, I/O
  stall fraction, overlap efficiency max(I/O busy, compute busy) / decode
  time, peak RSS against trunk + KV + budget (+5%), and the roofline
  min(disk bandwidth / missed expert bytes per decode token, in-RAM decode
  rate) with the variant's ratio to it, and the hit rates of LRU, LFU and
  Belady's optimum replayed on each run's own routing trace at its budget
  (`tern trace replay`); the disk bandwidth is the faster of
  the probe (O_DIRECT, 8 MiB blocks at random places, 8 in flight, before
  the round) and the engine's own read rate while decode's reads were in
  flight. The in-RAM rate comes from an all-resident run (--preload with a
  budget of every expert) at the end of the same round unless --no-inram.
  --interference adds, per round, an all-resident run beside a background
  O_DIRECT reader of the experts file paced to the first variant's decode
  read rate, and decode's ratio to min(disk / missed bytes, that rate): on
  a virtual machine the reads themselves slow the cores (docs/RESULTS.md).
  It is not a bound: an evenly paced reader costs more than the engine's
  bursts (decode came out 1.44x of it).

  /usr/bin/python3 tools/bench_engine.py MODEL.tern [--ram 1536M] [--cap 3G]
      [--tokens 64] [--prompt-tokens 64] [--runs 3] [--threads N]
      [--variant NAME='[KEY=VALUE ...] --flag value ...' ...] [--paths avx2,avx512]

Without --variant the single variant "default" runs the engine's defaults.
A variant's leading KEY=VALUE words set its environment.
--oracle adds a variant whose lookahead prefetches the true routing (the same
request's trace, recorded before the rounds): the streamer with a perfect
predictor, so a gap left to the roofline splits into prediction and machinery.
With it, "{oracle}" in a variant's words is that trace's path.
--paths A/B-tests kernel paths (TERN_KERNELS) as variants.
Each variant's ratio to the first is paired by round and summarised twice:
the median with every round's ratio, and the geometric mean with its 95%
confidence interval (Student's t on the log-ratios, rounds as independent):
an interval that holds 1 means this many rounds cannot tell the two apart.
Numbers are measured, never asserted in tests.
"""
import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TERN = os.path.join(HERE, "..", "build", "release", "bin", "tern")
CGROUP_ROOT = "/sys/fs/cgroup/memory"
GIB, MIB = 1 << 30, 1 << 20


# Two-sided 95% quantiles of Student's t by degrees of freedom; beyond 30 the
# normal's 1.96 (within 4% of t's from there on).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
        18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
        26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042}


def paired_interval(ratios):
    """The geometric mean of per-round ratios B/A and its 95% confidence
    interval (Student's t on the logs: the rounds taken as independent, the
    log-ratio as normal), as (mean, low, high); None below two rounds.
    An interval that holds 1 means the rounds cannot tell B from A."""
    logs = [math.log(r) for r in ratios if r > 0]
    if len(logs) < 2:
        return None
    m = statistics.fmean(logs)
    half = T975.get(len(logs) - 1, 1.96) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.upper().rstrip("B").rstrip("I")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def disk_bandwidth(path, nbytes=2 << 30, depth=8, block=8 << 20):
    """O_DIRECT reads of up to nbytes of `path` in `block`-sized requests at
    random places over the file with `depth` in flight (threads; os.preadv
    releases the GIL), like the engine's reads: a single sequential stream (dd)
    underestimates what the device delivers at a queue depth of 8."""
    import mmap
    import threading
    import random
    file_blocks = max(1, os.path.getsize(path) // block)
    count = max(1, min(nbytes // block, file_blocks))
    # Blocks at random places over the whole file, as expert reads land.
    offsets = [b * block for b in random.Random(1).sample(range(file_blocks), count)]
    evict(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    lock = threading.Lock()
    done = [0]

    def worker():
        buf = mmap.mmap(-1, block)
        while True:
            with lock:
                if not offsets:
                    return
                off = offsets.pop()
            n = os.preadv(fd, [buf], off)
            with lock:
                done[0] += n

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(depth)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - t0
    os.close(fd)
    return done[0] / seconds


class BackgroundReader:
    """O_DIRECT reads of `path` at random `block`-aligned places, `depth` in
    flight (threads), paced to `rate` bytes/s, while in effect (`with
    BackgroundReader(path, rate):`). --interference runs the all-resident
    engine beside it: how much reading at the streamed run's rate slows the
    cores' work with nothing to wait for. `.achieved` (bytes/s) and
    `.cpu_seconds` (this process's CPU time, the reader's own cost) are set
    on exit."""

    def __init__(self, path, rate, depth=8, block=4 << 20):
        self.path, self.rate, self.depth, self.block = path, rate, depth, block
        self.achieved, self.cpu_seconds = 0.0, 0.0

    def __enter__(self):
        import mmap
        import random
        import threading
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.issued = 0
        self.done = 0
        self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
        blocks = max(1, os.path.getsize(self.path) // self.block)
        rng = random.Random(2)

        def worker():
            buf = mmap.mmap(-1, self.block)
            while not self.stop.is_set():
                with self.lock:
                    due = self.t0 + self.issued / self.rate  # paced: the nth byte not before n / rate
                    self.issued += self.block
                    off = rng.randrange(blocks) * self.block
                wait = due - time.monotonic()
                if wait > 0 and self.stop.wait(wait):
                    return
                n = os.preadv(self.fd, [buf], off)
                with self.lock:
                    self.done += n

        self.cpu0 = sum(os.times()[:2])
        self.t0 = time.monotonic()
        self.threads = [threading.Thread(target=worker, daemon=True) for _ in range(self.depth)]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()
        seconds = time.monotonic() - self.t0
        self.achieved = self.done / seconds if seconds > 0 else 0.0
        self.cpu_seconds = sum(os.times()[:2]) - self.cpu0
        os.close(self.fd)
        return False


def make_cgroup(limit):
    """A child memory cgroup capping RSS + page cache; None if not possible."""
    try:
        with open("/proc/self/cgroup") as f:
            parent = next(l.split(":", 2)[2].strip() for l in f if ":memory:" in l)
        path = os.path.join(CGROUP_ROOT, parent.lstrip("/"), f"tern-bench-{os.getpid()}")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        return path
    except (OSError, StopIteration):
        return None


class ReadLimit:
    """Caps the reads of path's disk at mb_per_s MB/s for this process and its
    children while in effect (`with ReadLimit(path, mb):`): a cgroup-v1 blkio
    child with throttle.read_bps_device (root only). A stand-in for a slower
    disk, such as the 0.45-1.2 GB/s this kind of machine reads at some hours."""

    def __init__(self, path, mb_per_s):
        st = os.stat(path)
        major, minor = os.major(st.st_dev), os.minor(st.st_dev)
        sysdev = f"/sys/dev/block/{major}:{minor}"
        if os.path.exists(os.path.join(sysdev, "partition")):  # throttle the whole disk
            with open(os.path.join(os.path.realpath(sysdev), "..", "dev")) as f:
                major, minor = (int(v) for v in f.read().split(":"))
        self.rule = f"{major}:{minor} {int(mb_per_s * 1e6)}"
        self.group = f"/sys/fs/cgroup/blkio/tern-read-limit-{os.getpid()}"

    def __enter__(self):
        os.makedirs(self.group, exist_ok=True)
        with open(os.path.join(self.group, "blkio.throttle.read_bps_device"), "w") as f:
            f.write(self.rule)
        with open(os.path.join(self.group, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        return self

    def __exit__(self, *exc):
        with open("/sys/fs/cgroup/blkio/cgroup.procs", "w") as f:  # back to the root group
            f.write(str(os.getpid()))
        os.rmdir(self.group)
        return False


def run_variant(cmd, env, cg):
    if cg:
        cmd = ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"tern failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return json.loads(p.stdout)["stats"]


def replay(tern, model, trace, ram):
    """Hit rates of every policy and Belady's optimum on a run's own routing
    trace at the cache size the run had (docs/TRACES.md)."""
    p = subprocess.run([tern, "trace", "replay", trace, "--ram", str(ram), "--model", model, "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"tern trace replay failed: {p.stderr}")
    return {k: v["hit_rate"] for k, v in json.loads(p.stdout)["policies"].items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ram", help="expert cache budget (default: half of the experts)")
    ap.add_argument("--cap", help="cgroup memory limit incl. page cache (default: trunk + KV + ram + 256M)")
    ap.add_argument("--no-cap", action="store_true", help="run without a cgroup limit")
    ap.add_argument("--tokens", type=int, default=64, help="tokens to generate")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--tern", default=os.environ.get("TERN_BINARY", DEFAULT_TERN))
    ap.add_argument("--variant", action="append", default=[], help="NAME='flags' (repeatable), interleaved; NAME='@PATH flags' runs another tern build")
    ap.add_argument("--paths", help="comma-separated kernel paths to A/B (TERN_KERNELS), as variants")
    ap.add_argument("--no-inram", action="store_true", help="skip the all-resident run (roofline)")
    ap.add_argument("--oracle", action="store_true",
                    help="add variant 'oracle': the defaults with a perfect predictor (TERN_PREFETCH_ORACLE set "
                         "to the routing of the same request, recorded once before the rounds)")
    ap.add_argument("--read-limit", type=float, help="cap the model disk's reads at this many MB/s (blkio cgroup)")
    ap.add_argument("--interference", action="store_true",
                    help="per round, one more all-resident run beside a background O_DIRECT reader of the experts "
                         "file at the first variant's decode read rate of that round: what the reads cost the cores")
    a = ap.parse_args()
    if a.read_limit:
        with ReadLimit(os.path.join(a.model, "manifest.json"), a.read_limit):
            return bench(a)
    return bench(a)


def bench(a):
    manifest = json.load(open(os.path.join(a.model, "manifest.json")))
    cfg = manifest["config"]
    cfg = cfg.get("text_config", cfg)  # a multimodal release (gemma4): the text model's config
    experts_file = os.path.join(a.model, manifest["experts"]["file"])
    experts = sum(l["stride"] * l["num_experts"] for l in manifest["experts"]["layers"])
    ram = parse_size(a.ram) if a.ram else experts // 2
    trunk = manifest["trunk"]["size"]
    heads_kv = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    width = heads_kv * head_dim
    if cfg.get("global_head_dim"):  # Gemma 4's full layers: their own head_dim and kv heads
        width = max(width, (cfg.get("num_global_key_value_heads") or heads_kv) * cfg["global_head_dim"])
    kv = cfg["num_hidden_layers"] * 2 * 4 * a.ctx * width  # upper bound (sliding layers keep less)
    limit = None if a.no_cap else (parse_size(a.cap) if a.cap else trunk + kv + ram + (256 << 20))
    cg = make_cgroup(limit) if limit else None

    variants = []  # (name, extra flags, env)
    for v in a.variant:
        name, _, flags = v.partition("=")
        words, env = shlex.split(flags), {}
        while words and "=" in words[0] and words[0].split("=")[0].isupper():  # leading KEY=VALUE: environment
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        variants.append((name, words, env))
    if a.paths:
        for p in a.paths.split(","):
            variants.append((p, [], {"TERN_KERNELS": p}))
    if not variants:
        variants = [("default", [], {})]
    prompt = ",".join(str((11 + 97 * i) % cfg["vocab_size"]) for i in range(a.prompt_tokens))
    base = [a.tern, "generate", a.model, "--tokens", prompt, "-n", str(a.tokens), "--ignore-eos", "--json",
            "--temperature", "0.8", "--seed", "1", "--ctx", str(a.ctx), "--no-usage"]
    if a.threads:
        base += ["--threads", str(a.threads)]

    trace = os.path.join("/tmp", f"tern-bench-trace-{os.getpid()}.jsonl")
    oracle = os.path.join("/tmp", f"tern-bench-oracle-{os.getpid()}.jsonl")
    if a.oracle:
        # Sampling is seeded and placement never changes results, so every
        # variant's run routes exactly as this one did.
        evict(experts_file)
        run_variant(base + ["--ram", str(ram), "--trace", oracle], dict(os.environ), cg)
        variants.append(("oracle", [], {"TERN_PREFETCH_ORACLE": oracle}))
        # Other variants may name the trace too: NAME='TERN_PREFETCH_ORACLE={oracle} --flag'.
        variants = [(n, [w.replace("{oracle}", oracle) for w in f], {k: v.replace("{oracle}", oracle)
                                                                      for k, v in e.items()})
                    for n, f, e in variants]
    runs = {v[0]: [] for v in variants}
    inram, bws = [], []
    inram_bg, readers = [], []  # --interference: all-resident runs beside a reader, and the readers
    for r in range(a.runs):
        bws.append(disk_bandwidth(experts_file))
        # Each round starts with the next variant: the run right after the
        # disk probe measured slower prefill (2026-12-05: 24-26 vs 29-34
        # tok/s for the same build first and second), so no variant is
        # always first.
        k = r % len(variants)
        for name, flags, env_extra in variants[k:] + variants[:k]:
            evict(experts_file)
            env = dict(os.environ, **env_extra)
            cmd = base + ["--ram", str(ram), "--trace", trace] + flags
            if flags and flags[0].startswith("@"):  # another build: NAME='@PATH flags'
                cmd = [flags[0][1:]] + base[1:] + ["--ram", str(ram), "--trace", trace] + flags[1:]
            stats = run_variant(cmd, env, cg)
            # The same run's routing replayed at its cache size: where the
            # engine's hit rate stands against Belady's optimum.
            stats["replay"] = replay(a.tern, a.model, trace, ram)
            stats["round"] = r
            runs[name].append(stats)
        if not a.no_inram:
            # The roofline's in-RAM rate from the same round: the host's
            # speed moves between minutes (one all-resident run per
            # invocation gave 16.7-24.1 tok/s for the same build and model).
            evict(experts_file)
            inram.append(run_variant(base + ["--ram", str(experts), "--preload"], dict(os.environ), None))
            if a.interference:
                # The first variant's decode read rate this round: its bytes
                # over its whole decode time (not only while reads were in
                # flight), so the reader is as busy on average as that run.
                s0 = runs[variants[0][0]][-1]
                rate = sum(x["bytes_read"] for x in s0["steps"][1:]) / s0["decode_seconds"] if s0["decode_seconds"] else 0
                evict(experts_file)
                with BackgroundReader(experts_file, max(rate, MIB)) as reader:
                    inram_bg.append(run_variant(base + ["--ram", str(experts), "--preload"], dict(os.environ), None))
                readers.append((rate, reader))
    for path in (trace, oracle):
        if os.path.exists(path):
            os.remove(path)
    if cg:
        os.rmdir(cg)

    def med(values):
        return statistics.median(values)  # of an even count: the mean of the middle two

    def decode_bytes_per_token(s):
        dec = s["steps"][1:]
        toks = sum(x["tokens"] for x in dec)
        return sum(x["bytes_read"] for x in dec) / toks if toks else 0.0

    bw = med(bws)
    inram_rates = [s["decode_tokens_per_second"] for s in inram]
    inram_rate = med(inram_rates) if inram else None
    print(f"model {a.model}: experts {experts / GIB:.2f} GiB, trunk {trunk / GIB:.3f} GiB; --ram {ram / GIB:.2f} GiB "
          f"({experts / ram:.1f}x smaller than the experts); cgroup limit "
          f"{f'{limit / GIB:.2f} GiB' if cg else 'none'}; prompt {a.prompt_tokens}, decode {a.tokens} tokens; "
          f"median of {a.runs} interleaved rounds; "
          + (f"disk reads capped at {a.read_limit:.0f} MB/s (blkio); " if a.read_limit else "")
          + f"disk O_DIRECT at queue depth 8 {bw / MIB:.0f} MiB/s "
          f"(rounds: {', '.join(f'{b / MIB:.0f}' for b in bws)})"
          + (f"; in RAM (all experts preloaded) {inram_rate:.2f} tok/s (rounds: "
             f"{', '.join(f'{x:.2f}' for x in inram_rates)})" if inram_rate else ""))
    inram_bg_rates = [s["decode_tokens_per_second"] for s in inram_bg]
    if inram_bg:
        print(f"in RAM beside a background O_DIRECT reader of the experts file at the first variant's decode read rate "
              f"of the round ({', '.join(f'{r / MIB:.0f}' for r, _ in readers)} MiB/s asked, "
              f"{', '.join(f'{x.achieved / MIB:.0f}' for _, x in readers)} achieved; the reader's own CPU "
              f"{', '.join(f'{x.cpu_seconds:.1f}' for _, x in readers)} s per run): {med(inram_bg_rates):.2f} tok/s "
              f"(rounds: {', '.join(f'{x:.2f}' for x in inram_bg_rates)}), "
              f"{med([b / f for b, f in zip(inram_bg_rates, inram_rates)]):.2f}x of in RAM paired by round")

    def row(label, fn):
        print(f"| {label} | " + " | ".join(fn(runs[n]) for n, _, _ in variants) + " |")

    print("| metric | " + " | ".join(n for n, _, _ in variants) + " |")
    print("| --- " * (1 + len(variants)) + "|")
    row("decode tok/s", lambda r: f"{med([s['decode_tokens_per_second'] for s in r]):.2f}")
    row("prefill tok/s", lambda r: f"{med([s['prefill_tokens_per_second'] for s in r]):.1f}")
    row("decode tok/s by round", lambda r: ", ".join(f"{s['decode_tokens_per_second']:.1f}" for s in r))
    if len(variants) > 1:
        # Paired by round: the disk's rate moves between rounds (1.1-2.4 GB/s
        # in one invocation on 2026-12-07) more than most changes move decode,
        # and every variant of a round saw the same hour.
        first = runs[variants[0][0]]

        def paired(key):
            def fn(r):
                ratios = [s[key] / f[key] for s, f in zip(r, first) if f[key] > 0]
                if not ratios:
                    return "-"
                text = f"{med(ratios):.3f} ({', '.join(f'{x:.2f}' for x in ratios)})"
                ci = paired_interval(ratios)
                return text + (f"; {ci[0]:.3f} [{ci[1]:.3f}, {ci[2]:.3f}]" if ci else "")
            return fn

        # The interval says whether the rounds can tell the variants apart:
        # an A/A pair (one build and flags twice, 8 rounds, 2026-12-07) gave
        # per-round decode ratios of 0.80-1.05, 0.977 [0.905, 1.054] on this
        # machine (docs/RESULTS.md).
        label = "paired by round: median (rounds); geometric mean [95% CI]"
        row(f"decode vs {variants[0][0]}, {label}", paired("decode_tokens_per_second"))
        row(f"prefill vs {variants[0][0]}, {label}", paired("prefill_tokens_per_second"))
    row("prefill tok/s by round", lambda r: ", ".join(f"{s['prefill_tokens_per_second']:.1f}" for s in r))
    row("time to first token", lambda r: f"{med([s['time_to_first_token'] for s in r]):.2f} s")
    # hit_rate counts the whole run, the cold prefill included; the recall
    # figures count decode only, so the two differ on a cold cache.
    row("hit rate, whole run (decode recall = cache + prefetch)",
        lambda r: f"{100 * med([s['hit_rate'] for s in r]):.1f}% ({100 * med([s['prefetch_recall'] for s in r]):.1f}"
                  f" = {100 * med([s['recall_cache_hits'] for s in r]):.1f}"
                  f" + {100 * med([s['recall_prefetch_hits'] for s in r]):.1f}%)")
    row("same run's trace replayed at the budget: LRU / LFU / Belady's optimum (whole run)",
        lambda r: " / ".join(f"{100 * med([s['replay'][p] for s in r]):.1f}%" for p in ("lru", "lfu", "belady")))
    row("lookahead predicted one layer ahead", lambda r: f"{100 * med([s['prediction_recall'] for s in r]):.1f}%")
    row("prefetch waste (bytes per useful byte)", lambda r: f"{med([s['prefetch_waste'] for s in r]):.2f}")
    row("expert MiB read per decode token", lambda r: f"{med([decode_bytes_per_token(s) for s in r]) / MIB:.1f}")
    row("I/O stall fraction of decode", lambda r: f"{100 * med([s['io_stall_fraction'] for s in r]):.0f}%")

    def overlap(s):
        d = s["decode_seconds"]
        return max(s["io_busy_seconds"], s["compute_busy_seconds"]) / d if d else 0.0

    row("overlap efficiency max(io, compute) / decode", lambda r: f"{med([overlap(s) for s in r]):.2f}")
    # The output head (lm_head) of each token runs before the next token's
    # first router: no expert read can be known, hence in flight, during it.
    row("output head's share of decode (no expert read known ahead)",
        lambda r: f"{100 * med([s.get('head_seconds', 0) / s['decode_seconds'] for s in r]):.0f}%")

    def decode_read_rate(s):
        # Decode's bytes over decode's time with a read in flight, which is
        # at least decode's bytes / decode time. The whole-run figure
        # (bytes_read / read_seconds) mixes in the cold prefill, whose reads
        # run slower (demo model, Q4_K, --ram 430M: prefill 545 MiB/s, decode
        # 1637, whole run 741): with it the roofline came out below the
        # measured decode rate (ratios 1.16-1.81 on issue 11's runs).
        dec = sum(x["bytes_read"] for x in s["steps"][1:])
        return dec / s["io_busy_seconds"] if s["io_busy_seconds"] > 0 else 0.0

    def roofline(s):
        # The device may deliver more to the engine's own reads (large
        # records, 8 in flight, and whatever the host caches) than to the
        # probe: the roofline takes the faster of the two, so it stays an
        # upper bound (decode bytes / decode time <= decode_read_rate).
        # Disk and in-RAM rate from the run's own round.
        b = decode_bytes_per_token(s)
        io_rate = max(bws[s["round"]], decode_read_rate(s)) / b if b else float("inf")
        return min(io_rate, inram_rates[s["round"]]) if inram_rates else io_rate

    row("Tern's read rate while decode's reads were in flight",
        lambda r: f"{med([decode_read_rate(s) for s in r]) / MIB:.0f} MiB/s")
    row("roofline min(disk / missed bytes, in-RAM)", lambda r: f"{med([roofline(s) for s in r]):.2f} tok/s")
    row("decode / roofline",
        lambda r: f"{med([s['decode_tokens_per_second'] / roofline(s) for s in r]):.2f}")
    if inram_bg_rates:
        # Reads slow the cores' own work on a virtual machine (2026-12-07: a
        # reader at 1.5 GB/s using ~5% of one core halved all-resident
        # decode), so the in-RAM rate is out of reach while streaming; this
        # bound takes the in-RAM rate measured beside reads at the first
        # variant's rate instead (other variants read at their own rates).
        def roofline_bg(s):
            return min(roofline(s), inram_bg_rates[s["round"]])

        # Not an upper bound: a reader paced evenly costs the cores more than
        # the engine's bursts do (2026-12-07, Q4_K: decode 1.44x of it).
        row("decode / min(disk / missed bytes, in-RAM beside a paced reader), not a bound",
            lambda r: f"{med([s['decode_tokens_per_second'] / roofline_bg(s) for s in r]):.2f}")
    row("peak RSS vs trunk + KV + budget",
        lambda r: f"{med([s['peak_rss'] for s in r]) / GIB:.2f} / "
                  f"{med([s['trunk_bytes'] + s['kv_bytes'] + s['cache_budget'] for s in r]) / GIB:.2f} GiB "
                  f"({100 * (med([s['peak_rss'] / (s['trunk_bytes'] + s['kv_bytes'] + s['cache_budget']) for s in r]) - 1):+.1f}%)")


if __name__ == "__main__":
    main()
