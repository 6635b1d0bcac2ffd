#!/usr/bin/env python3
"""Summarizes the raw output of bench/ab/run.sh: per benchmark and value size, the median
micros/op of each build over the rounds, and NEW/BASE as a throughput ratio (>1: NEW faster).

usage: bench/ab/summarize.py DIR
"""
import pathlib
import re
import statistics
import sys

LINE = re.compile(r"^(\w+)\s*:\s*([0-9.]+) micros/op")


def main(directory):
    runs = {}
    for path in sorted(pathlib.Path(directory).glob("*-round*.txt")):
        side, size, _ = path.stem.split("-")
        for line in path.read_text().splitlines():
            m = LINE.match(line)
            if m:
                runs.setdefault((m.group(1), int(size), side), []).append(float(m.group(2)))
    print("| benchmark | value | base µs/op (median) | new µs/op (median) | new/base throughput | rounds |")
    print("|---|---:|---:|---:|---:|---:|")
    for bench in ("fillrandom", "readrandom", "readseq"):
        for size in (1024, 100):
            base, new = runs.get((bench, size, "base")), runs.get((bench, size, "new"))
            if not base or not new:
                continue
            b, n = statistics.median(base), statistics.median(new)
            print(f"| {bench} | {size} B | {b:.3f} | {n:.3f} | {b / n:.3f}x | {len(base)} |")


if __name__ == "__main__":
    main(sys.argv[1])
