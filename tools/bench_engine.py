#!/usr/bin/env python3
"""Engine benchmark: runs `tern generate` on an installed model with an expert
cache smaller than the model (default: half the experts), inside a cgroup-v1
memory limit when one can be made (so the page cache cannot hide reads), and
measures the disk's O_DIRECT read bandwidth in the same run. Prints a
Markdown table for docs/RESULTS.md. Numbers are measured, never asserted.

  /usr/bin/python3 tools/bench_engine.py MODEL.tern [--ram 1536M] [--tokens 64] [--runs 3]
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
    a = ap.parse_args()

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
    runs = []
    for _ in range(a.runs):
        if cg:
            p = subprocess.run(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *cmd],
                               capture_output=True, text=True)
        else:
            p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"tern failed: {p.stderr}")
        runs.append(json.loads(p.stdout)["stats"])
    if cg:
        os.rmdir(cg)

    def med(key):
        v = sorted(r[key] for r in runs)
        return v[len(v) // 2]

    total_tokens = a.prompt_tokens + a.tokens
    gib = 1 << 30
    print(f"model: {a.model}: experts {experts / gib:.2f} GiB, trunk {trunk / gib:.3f} GiB; --ram {ram / gib:.2f} GiB "
          f"({experts / ram:.1f}x smaller than the experts); cgroup limit {limit / gib:.2f} GiB "
          f"({'on' if cg else 'unavailable'}); median of {a.runs} runs")
    print("| metric | value |\n| --- | --- |")
    print(f"| disk O_DIRECT read bandwidth (dd, 1 GiB, 4 MiB blocks) | {bw / gib:.2f} GiB/s |")
    print(f"| prefill ({a.prompt_tokens} tokens) | {med('prefill_tokens_per_second'):.1f} tok/s |")
    print(f"| decode ({a.tokens} tokens) | {med('decode_tokens_per_second'):.2f} tok/s |")
    print(f"| time to first token | {med('time_to_first_token'):.2f} s |")
    print(f"| expert cache hit rate | {100 * med('hit_rate'):.1f}% |")
    print(f"| expert MiB read per token (prefill + decode) | {med('bytes_read') / (1 << 20) / total_tokens:.1f} |")
    print(f"| expert read time / total time | {med('read_seconds'):.2f} s / "
          f"{med('prefill_seconds') + med('decode_seconds'):.2f} s |")
    print(f"| peak RSS | {med('peak_rss') / gib:.2f} GiB (trunk {trunk / gib:.2f} + KV {kv / gib:.2f} + "
          f"--ram {ram / gib:.2f} = {(trunk + kv + ram) / gib:.2f} GiB) |")


if __name__ == "__main__":
    main()
