#!/usr/bin/env python3
"""The least copying a value log must do to stay within a space limit under uniformly random
writes: a model, not a measurement of splitkv.

A log of fixed-size segments takes W writes of keys drawn uniformly from K, after WARMUP writes
that are not counted (db_bench's `fillrandom` then `overwrite` is `--writes W --warmup W`), or
starting from a log that holds every key once (`--prefill`). Whenever the log exceeds LIMIT times its live
bytes, the segment with the fewest live records (greedy; under uniform keys that is also the
oldest) is cleaned: its live records are appended at the head and the segment is freed. The
cleaner knows liveness exactly and pays nothing else, so its copy volume is a floor for any
log-structured store at that limit: splitkv's GC and its compaction moves together, WiscKey,
Titan and BlobDB's garbage collection alike. Hot keys, deletes or a laxer limit lower it.

usage: bench/gc_model.py [--keys K] [--writes W] [--warmup N] [--prefill] [--limit L ...]
                         [--record-bytes B] [--segment-bytes S] [--seed N]

Prints one line per limit: records copied, MiB copied, and copies per user write.
"""

import argparse
import heapq
import random


def simulate(keys, warmup, writes, prefill, limit, records_per_segment, seed):
    """Returns the number of records the cleaner copied during the `writes` after `warmup`."""
    rng = random.Random(seed)
    location = {}  # key -> segment holding its live record
    live = []  # live records per segment
    members = []  # keys written to each segment, in order (dead ones included)
    freed = []  # per segment: True once cleaned
    state = {"head": None, "fill": 0, "records": 0}

    def new_segment():
        live.append(0)
        members.append([])
        freed.append(False)
        state["head"] = len(live) - 1
        state["fill"] = 0

    def append(key):
        if state["head"] is None or state["fill"] == records_per_segment:
            new_segment()
        head = state["head"]
        old = location.get(key)
        if old is not None:
            live[old] -= 1
        location[key] = head
        live[head] += 1
        members[head].append(key)
        state["fill"] += 1
        state["records"] += 1

    def clean_while_over():
        copied = 0
        while state["records"] > limit * len(location):
            candidates = [(live[s], s) for s in range(len(live)) if not freed[s] and s != state["head"]]
            if not candidates:
                break
            _, victim = min(candidates)
            keep = [k for k in members[victim] if location.get(k) == victim]
            state["records"] -= len(members[victim])
            for key in keep:
                live[victim] -= 1
                del location[key]
                append(key)
            copied += len(keep)
            freed[victim] = True
            members[victim] = []
        return copied

    if prefill:
        for key in range(keys):
            append(key)
    copied = 0
    for i in range(warmup + writes):
        append(rng.randrange(keys))
        cleaned = clean_while_over()
        if i >= warmup:
            copied += cleaned
    return copied


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=0, help="writes before the counted ones")
    parser.add_argument("--prefill", action="store_true", help="start from a log holding every key once")
    parser.add_argument("--limit", type=float, nargs="+", default=[1.24, 1.3])
    # 16-byte key, 1024-byte value and splitkv's 26-byte record header.
    parser.add_argument("--record-bytes", type=int, default=1066)
    parser.add_argument("--segment-bytes", type=int, default=16 << 20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    per_segment = args.segment_bytes // args.record_bytes
    print(
        f"keys {args.keys}, writes {args.writes} after {args.warmup}, prefill {args.prefill}, "
        f"{args.record_bytes}-byte records, {per_segment} per segment, seed {args.seed}"
    )
    for limit in args.limit:
        copied = simulate(args.keys, args.warmup, args.writes, args.prefill, limit, per_segment, args.seed)
        mib = copied * args.record_bytes / (1 << 20)
        print(f"limit {limit:.2f}: copied {copied} records, {mib:.1f} MiB, {copied / args.writes:.3f} per write")


if __name__ == "__main__":
    main()
