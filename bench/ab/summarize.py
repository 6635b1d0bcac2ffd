#!/usr/bin/env python3
"""Summarizes the raw output of bench/ab/run.sh: per benchmark and value size, the median
micros/op of each build over the rounds, and NEW/BASE as a throughput ratio (>1: NEW faster).
For MODE=threads (files named SIDE-SIZE-tTHREADS[none]-roundN.txt), the median total ops/s per
build and variant, NEW/BASE, and each build's two threads over its one thread, per round.

usage: bench/ab/summarize.py DIR
"""
import pathlib
import re
import statistics
import sys

LINE = re.compile(r"^(\w+)\s*:\s*([0-9.]+) micros/op")


OPS = re.compile(r"^\s+([0-9]+) ops/s")


def threads(paths):
    """Median total ops/s per (variant, side), and two threads over one per round and side."""
    ops = {}
    for path in paths:
        side, size, variant, round_ = path.stem.split("-")
        found = [int(m.group(1)) for m in map(OPS.match, path.read_text().splitlines()) if m]
        if found:
            ops[(f"{size}-{variant}", side, round_)] = found[0]
    variants = sorted({v for v, _, _ in ops}, key=lambda v: (v.endswith("none"), -int(v.split("-")[0]), v))
    rounds = sorted({r for _, _, r in ops})
    print("| fillrandom | base ops/s (median) | new ops/s (median) | new/base | rounds |")
    print("|---|---:|---:|---:|---:|")
    for v in variants:
        base = [ops[(v, "base", r)] for r in rounds if (v, "base", r) in ops]
        new = [ops[(v, "new", r)] for r in rounds if (v, "new", r) in ops]
        if base and new:
            b, n = statistics.median(base), statistics.median(new)
            print(f"| {v} | {b:,.0f} | {n:,.0f} | {n / b:.2f}x | {len(base)} |")
    print()
    print("two threads over one thread, per round (total ops/s):")
    for size, none in (("1024", ""), ("100", ""), ("1024", "none")):
        for side in ("base", "new"):
            ratios = [
                ops[(f"{size}-t2{none}", side, r)] / ops[(f"{size}-t1{none}", side, r)]
                for r in rounds
                if (f"{size}-t2{none}", side, r) in ops and (f"{size}-t1{none}", side, r) in ops
            ]
            if ratios:
                per_round = " ".join(f"{x:.2f}" for x in ratios)
                print(f"  {size} B{' no limit' if none else ''} {side}: median {statistics.median(ratios):.2f}x ({per_round})")


def main(directory):
    paths = sorted(pathlib.Path(directory).glob("*-round*.txt"))
    if paths and len(paths[0].stem.split("-")) == 4:
        threads(paths)
        return
    runs = {}
    for path in paths:
        side, size, _ = path.stem.split("-")
        for line in path.read_text().splitlines():
            m = LINE.match(line)
            if m:
                runs.setdefault((m.group(1), int(size), side), []).append(float(m.group(2)))
    print("| benchmark | value | base µs/op (median) | new µs/op (median) | new/base throughput | rounds |")
    print("|---|---:|---:|---:|---:|---:|")
    for bench in ("fillseq", "fillrandom", "overwrite", "readrandom", "readseq"):
        for size in (1024, 100):
            base, new = runs.get((bench, size, "base")), runs.get((bench, size, "new"))
            if not base or not new:
                continue
            b, n = statistics.median(base), statistics.median(new)
            print(f"| {bench} | {size} B | {b:.3f} | {n:.3f} | {b / n:.3f}x | {len(base)} |")


if __name__ == "__main__":
    main(sys.argv[1])
