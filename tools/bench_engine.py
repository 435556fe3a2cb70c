#!/usr/bin/env python3
"""Engine benchmark: runs `tern generate` on an installed model with an expert
cache smaller than the model (default: half the experts), inside a cgroup-v1
memory limit when one can be made (so the page cache cannot hide reads), and
measures the disk's O_DIRECT read bandwidth in the same run. Prints a
Markdown table for docs/RESULTS.md. Numbers are measured, never asserted.

  /usr/bin/python3 tools/bench_engine.py MODEL.tern [--ram 1536M] [--tokens 64] [--runs 3]
      [--paths avx2,avx512]

--paths A/B-tests kernel paths (TERN_KERNELS) in one run: each round runs every
path in turn, and the table gets a column per path plus each path's ratio to
the first.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TERN = os.path.join(HERE, "..", "build", "release", "bin", "tern")
CGROUP_ROOT = "/sys/fs/cgroup/memory"


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.upper().rstrip("B").rstrip("I")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


def disk_bandwidth(path, nbytes=1 << 30):
    """O_DIRECT sequential read of up to nbytes of `path`, 4 MiB blocks."""
    block = 4 << 20
    count = max(1, min(nbytes, os.path.getsize(path)) // block)
    t0 = time.monotonic()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={block}", f"count={count}", "iflag=direct"],
                   check=True, capture_output=True)
    return count * block / (time.monotonic() - t0)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ram", help="expert cache budget (default: half of the experts)")
    ap.add_argument("--tokens", type=int, default=64, help="tokens to generate")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tern", default=os.environ.get("TERN_BINARY", DEFAULT_TERN))
    ap.add_argument("--paths", help="comma-separated kernel paths to A/B, interleaved (e.g. avx2,avx512)")
    a = ap.parse_args()
    paths = a.paths.split(",") if a.paths else [None]

    manifest = json.load(open(os.path.join(a.model, "manifest.json")))
    cfg = manifest["config"]
    experts = sum(l["stride"] * l["num_experts"] for l in manifest["experts"]["layers"])
    ram = parse_size(a.ram) if a.ram else experts // 2
    trunk = manifest["trunk"]["size"]
    ctx = 4096
    kv = cfg["num_hidden_layers"] * 2 * 4 * ctx * cfg["num_key_value_heads"] * cfg.get(
        "head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    overhead = 256 << 20
    limit = trunk + kv + ram + overhead
    cg = make_cgroup(limit)

    bw = disk_bandwidth(os.path.join(a.model, manifest["experts"]["file"]))
    prompt = ",".join(str((11 + 97 * i) % cfg["vocab_size"]) for i in range(a.prompt_tokens))
    cmd = [a.tern, "generate", a.model, "--tokens", prompt, "-n", str(a.tokens), "--ignore-eos", "--json",
           "--ram", str(ram), "--temperature", "0.8", "--seed", "1"]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    runs = {path: [] for path in paths}
    for _ in range(a.runs):
        for path in paths:
            env = dict(os.environ, **({"TERN_KERNELS": path} if path else {}))
            if cg:
                p = subprocess.run(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *cmd],
                                   capture_output=True, text=True, env=env)
            else:
                p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if p.returncode != 0:
                sys.exit(f"tern failed: {p.stderr}")
            runs[path].append(json.loads(p.stdout)["stats"])
    if cg:
        os.rmdir(cg)

    def med(key, path):
        v = sorted(r[key] for r in runs[path])
        return v[len(v) // 2]

    total_tokens = a.prompt_tokens + a.tokens
    gib = 1 << 30
    print(f"model: {a.model}: experts {experts / gib:.2f} GiB, trunk {trunk / gib:.3f} GiB; --ram {ram / gib:.2f} GiB "
          f"({experts / ram:.1f}x smaller than the experts); cgroup limit {limit / gib:.2f} GiB "
          f"({'on' if cg else 'unavailable'}); median of {a.runs} runs")
    rows = [
        (f"prefill ({a.prompt_tokens} tokens)", lambda p: f"{med('prefill_tokens_per_second', p):.1f} tok/s",
         lambda p: med("prefill_tokens_per_second", p)),
        (f"decode ({a.tokens} tokens)", lambda p: f"{med('decode_tokens_per_second', p):.2f} tok/s",
         lambda p: med("decode_tokens_per_second", p)),
        ("time to first token", lambda p: f"{med('time_to_first_token', p):.2f} s", None),
        ("expert cache hit rate", lambda p: f"{100 * med('hit_rate', p):.1f}%", None),
        ("expert MiB read per token (prefill + decode)",
         lambda p: f"{med('bytes_read', p) / (1 << 20) / total_tokens:.1f}", None),
        ("expert read time / total time",
         lambda p: f"{med('read_seconds', p):.2f} s / {med('prefill_seconds', p) + med('decode_seconds', p):.2f} s",
         None),
        ("peak RSS", lambda p: f"{med('peak_rss', p) / gib:.2f} GiB (trunk {trunk / gib:.2f} + KV {kv / gib:.2f} + "
                               f"--ram {ram / gib:.2f} = {(trunk + kv + ram) / gib:.2f} GiB)", None),
    ]
    names = [p or "value" for p in paths]
    ratio_cols = [f"{p} vs {paths[0]}" for p in paths[1:]]
    print("| metric | " + " | ".join(names + ratio_cols) + " |")
    print("| --- " * (1 + len(names) + len(ratio_cols)) + "|")
    print(f"| disk O_DIRECT read bandwidth (dd, 1 GiB, 4 MiB blocks) | {bw / gib:.2f} GiB/s |" + " |" * (
        len(names) + len(ratio_cols) - 1))
    for label, fmt, value in rows:
        ratios = [f"{value(p) / value(paths[0]):.2f}x" if value else "" for p in paths[1:]]
        print(f"| {label} | " + " | ".join([fmt(p) for p in paths] + ratios) + " |")


if __name__ == "__main__":
    main()
