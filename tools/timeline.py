#!/usr/bin/env python3
"""Where decode's disk sat idle, from a TERN_TIMELINE log (src/tern/core/timeline.h).

  TERN_TIMELINE=/tmp/t.tsv tern generate MODEL --ram 2G -p ... -n 32
  tools/timeline.py /tmp/t.tsv

Decode is the span from the first one-row layer to the last head. The disk
counts as busy while at least one expert read is queued or on the device
(queued at 'q', ready at 'f': the engine's io_busy_seconds). Each idle moment
is charged to what the compute thread was doing then: a layer's attention and
router (split: the first MoE layer of a token, the others), its MoE block
(experts computing), the work after it (lookahead refresh), the output head,
or between tokens (sampling). Waits ('w'..'W') are stall: compute idle while a
read it needs is in flight.
"""
import argparse
import collections
import json
import sys


def load(path):
    ev = []
    with open(path) as f:
        for line in f:
            us, kind, a, b = line.rstrip("\n").split("\t")
            ev.append((int(us), kind, int(a), int(b)))
    # The engine writes marks in time order (the clock is read under the log's
    # lock); the walk below depends on it, so a log out of order is refused.
    for i in range(1, len(ev)):
        if ev[i][0] < ev[i - 1][0]:
            sys.exit(f"{path}: line {i + 1} is earlier than line {i}: the marks are not in time order")
    return ev


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--skip-tokens", type=int, default=2, help="decode tokens to leave out at the start (warm-up)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    ev = load(args.log)
    if not ev:
        sys.exit("empty timeline")
    # Decode: one-row layers. Start at the (skip+1)-th one-row layer 0.
    starts = [i for i, (t, k, a, b) in enumerate(ev) if k == "l" and a == 0 and b == 1]
    if len(starts) <= args.skip_tokens:
        sys.exit("fewer decode tokens than --skip-tokens")
    first = starts[args.skip_tokens]
    heads = [i for i, (t, k, a, b) in enumerate(ev) if k == "H"]
    last = max(heads)
    t0, t1 = ev[first][0], ev[last][0]
    tokens = len(starts) - args.skip_tokens
    # Busy state before the window: replay all queued/landed before it.
    loading = 0
    for t, k, a, b in ev[:first]:
        loading += (k == "q") - (k == "f")
    first_moe = None
    phase = "attention, first MoE layer"
    waiting = False
    idle = collections.Counter()
    busy = collections.Counter()
    stall_idle = 0.0
    stall = 0.0
    stall_by = collections.Counter()
    urgent_of = {}
    wait_key = None
    cur_layer = 0
    reads = collections.Counter()
    prev = t0
    layers_seen = set()
    for t, k, a, b in ev[first:last + 1]:
        dt = t - prev
        if dt > 0:
            (busy if loading > 0 else idle)[phase] += dt
            if waiting:
                stall += dt
                stall_by[wait_key] += dt
        prev = t
        if k == "q":
            urgent_of[(a, b >> 1)] = b & 1
            loading += 1
            reads["urgent" if b & 1 else "prefetch"] += 1
        elif k == "f":
            loading -= 1
        elif k == "l":
            if a == 0:
                first_moe = None
            phase = "attention, first MoE layer" if first_moe is None else "attention, other layers"
        elif k == "m":
            if first_moe is None:
                first_moe = a
            phase = "MoE block (experts)"
            layers_seen.add(a)
        elif k == "M":
            phase = "after MoE (refresh, residual)"
        elif k == "w":
            waiting = True
            which = "first MoE layer" if a == first_moe else "other layers"
            wait_key = f"{which}, {'demand' if urgent_of.get((a, b), 1) else 'prefetched'} read"
        elif k == "W":
            waiting = False
        elif k == "h":
            phase = "output head"
        elif k == "H":
            phase = "between tokens (sampling)"
    total = (t1 - t0)
    tb = sum(busy.values())
    if args.json:
        print(json.dumps({
            "tokens": tokens, "seconds": total / 1e6, "disk_busy_fraction": tb / total,
            "stall_fraction": stall / total,
            "stall": {k: v / total for k, v in stall_by.items()},
            "disk_idle": {p: idle[p] / total for p in idle},
            "phase": {p: (idle[p] + busy[p]) / total for p in set(idle) | set(busy)},
            "reads": {"demand": reads["urgent"], "prefetch": reads["prefetch"]},
        }, indent=1))
        return
    print(f"decode window: {tokens} tokens, {total / 1e6:.3f} s ({tokens / (total / 1e6):.2f} tok/s)")
    print(f"disk busy (a read queued or in flight): {100 * tb / total:.1f}%; stall (layer waits): {100 * stall / total:.1f}%")
    print(f"reads queued: {reads['urgent']} demand, {reads['prefetch']} prefetch ({(reads['urgent'] + reads['prefetch']) / tokens:.1f} per token)")
    for key, v in sorted(stall_by.items(), key=lambda kv: -kv[1]):
        print(f"  stall waiting for a {key}: {100 * v / total:.1f}% ({v / 1e3 / tokens:.2f} ms/token)")
    print(f"{'compute was in':34s} {'time %':>7s} {'disk idle %':>12s} {'idle ms/token':>14s}")
    for p in sorted(set(idle) | set(busy), key=lambda p: -idle[p]):
        tot = idle[p] + busy[p]
        print(f"{p:34s} {100 * tot / total:7.1f} {100 * idle[p] / total:12.1f} {idle[p] / 1e3 / tokens:14.2f}")


if __name__ == "__main__":
    main()
