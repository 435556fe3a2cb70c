#!/usr/bin/env python3
"""Tern against llama.cpp on the same weights, under the same memory caps.

MODEL.tern is a qwen3_moe install; PEER.gguf the same weights block for block
(tools/tern_to_gguf.py). For each cap (a cgroup-v1 memory limit that counts
page cache too: "none", a size, or model/N with N dividing the GGUF's size),
per round, interleaved: the disk's O_DIRECT read rate is measured, both
models' files are evicted from the page cache, then `tern generate` runs
with `--ram auto` (the memory planner sizes the expert cache from the cap)
and then the peer (tools/peer/llamacpp_decode.cpp, built against a llama.cpp
built outside the repository: docs/RESULTS.md) with llama.cpp's defaults
(mmap). Both prefill the same prompt of token ids and decode greedily.
Prints a Markdown table of medians for docs/RESULTS.md. Numbers are
measured, never asserted in tests.

  /usr/bin/python3 tools/bench_peer.py MODEL.tern PEER.gguf --peer PATH/llamacpp_decode
      [--caps none,model/2,model/4] [--prompt-tokens 64] [--tokens 24] [--runs 2]
      [--peer-flags '--no-repack'] [--tern-flags '--prefetch 0'] [--threads N]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_engine as be  # noqa: E402


def run_json(cmd, cg, env=None):
    """Runs cmd (inside cgroup cg when given); returns its last stdout line as JSON."""
    if cg:
        cmd = ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cap_bytes(spec, model_bytes):
    if spec == "none":
        return None
    if spec.startswith("model/"):
        return model_bytes // int(spec[len("model/"):])
    return be.parse_size(spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("gguf")
    ap.add_argument("--peer", required=True, help="the llamacpp_decode binary")
    ap.add_argument("--peer-flags", default="", help="extra flags for the peer, e.g. '--no-repack'")
    ap.add_argument("--tern-flags", default="", help="extra flags for tern generate, e.g. '--prefetch 0'")
    ap.add_argument("--caps", default="none,model/2,model/4")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tern", default=os.environ.get("TERN_BINARY", be.DEFAULT_TERN))
    a = ap.parse_args()

    manifest = json.load(open(os.path.join(a.model, "manifest.json")))
    vocab = manifest["config"]["vocab_size"]
    experts_file = os.path.join(a.model, manifest["experts"]["file"])
    trunk_file = os.path.join(a.model, manifest["trunk"]["file"])
    model_bytes = os.path.getsize(a.gguf)
    prompt = ",".join(str((11 + 97 * i) % vocab) for i in range(a.prompt_tokens))
    tern_cmd = [a.tern, "generate", a.model, "--tokens", prompt, "-n", str(a.tokens), "--ignore-eos", "--json",
                "--greedy", "--no-usage", "--threads", str(a.threads), "--ram", "auto", *shlex.split(a.tern_flags)]
    peer_cmd = [a.peer, a.gguf, prompt, str(a.tokens), "--threads", str(a.threads), *shlex.split(a.peer_flags)]

    print(f"model {a.model} / {a.gguf} ({model_bytes / be.GIB:.2f} GiB); prompt {a.prompt_tokens}, decode {a.tokens} "
          f"tokens, {a.threads} threads; median of {a.runs} interleaved rounds")
    print("| cap | disk MiB/s | Tern decode tok/s | llama.cpp decode tok/s | Tern / llama.cpp | Tern prefill tok/s | "
          "llama.cpp prefill tok/s | Tern hit rate | Tern MiB read / token | Tern peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for spec in a.caps.split(","):
        limit = cap_bytes(spec, model_bytes)
        cg = be.make_cgroup(limit) if limit else None
        if limit and not cg:
            sys.exit("cannot create a memory cgroup (cgroup v1 memory controller, as root)")
        tern, peer, bws = [], [], []
        for _ in range(a.runs):
            bws.append(be.disk_bandwidth(experts_file))
            for f in (experts_file, trunk_file, a.gguf):
                be.evict(f)
            tern.append(run_json(tern_cmd, cg)["stats"])
            for f in (experts_file, trunk_file, a.gguf):
                be.evict(f)
            peer.append(run_json(peer_cmd, cg))
        if cg:
            os.rmdir(cg)
        med = statistics.median  # of an even count: the mean of the middle two
        td = med([s["decode_tokens_per_second"] for s in tern])
        pd = med([s["decode_tokens_per_second"] for s in peer])
        total = a.prompt_tokens + a.tokens
        label = spec if not limit else f"{spec} = {limit / be.GIB:.2f} GiB"
        print(f"| {label} | {med(bws) / be.MIB:.0f} | {td:.2f} | {pd:.2f} | {td / pd:.1f}x | "
              f"{med([s['prefill_tokens_per_second'] for s in tern]):.1f} | "
              f"{med([s['prefill_tokens_per_second'] for s in peer]):.1f} | "
              f"{100 * med([s['hit_rate'] for s in tern]):.0f}% | "
              f"{med([s['bytes_read'] / total for s in tern]) / be.MIB:.0f} | "
              f"{med([s['peak_rss'] for s in tern]) / be.GIB:.2f} GiB |", flush=True)


if __name__ == "__main__":
    main()
