#!/usr/bin/env python3
"""Summarizes bench/peers/run.sh output: per value size, peer and benchmark, the median micros/op
of the harness and of the engine's own db_bench over the rounds, and the ratio harness/db_bench
of micros/op (1.00: the same; above 1: the harness measured the peer slower), as the median of
the per-round ratios with their range.

usage: summarize.py OUT_DIR   (files CONFIG-SIZE-roundN.txt, CONFIG = PEER-harness|PEER-dbbench)
"""
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^(\S+)\s+:\s+([\d.]+) micros/op")
FILE = re.compile(r"^(\w+)-(harness|dbbench)-(\d+)-round(\d+)\.txt$")
ORDER = ["fillseq", "fillrandom", "overwrite", "readrandom", "readseq"]


def parse(path):
    """Benchmark name -> micros/op from one run's output (LevelDB and RocksDB line formats)."""
    result = {}
    for line in path.read_text().splitlines():
        match = LINE.match(line)
        if match:
            result[match.group(1)] = float(match.group(2))
    return result


def main(out):
    # (peer, size, tool) -> round -> benchmark -> micros/op
    runs = defaultdict(dict)
    for path in sorted(Path(out).iterdir()):
        match = FILE.match(path.name)
        if match:
            peer, tool, size, round_ = match.groups()
            runs[(peer, int(size), tool)][int(round_)] = parse(path)
    for peer in sorted({key[0] for key in runs}):
        for size in sorted({key[1] for key in runs if key[0] == peer}):
            harness, dbbench = runs.get((peer, size, "harness"), {}), runs.get((peer, size, "dbbench"), {})
            rounds = sorted(set(harness) & set(dbbench))
            print(f"\n{peer}, {size}-byte values, {len(rounds)} rounds (micros/op, medians)\n")
            print("| benchmark | harness | own db_bench | harness/db_bench (range) |")
            print("|---|---|---|---|")
            for name in ORDER:
                pairs = [(harness[r][name], dbbench[r][name]) for r in rounds
                         if name in harness[r] and name in dbbench[r]]
                if not pairs:
                    continue
                ratios = [h / d for h, d in pairs]
                h = statistics.median(p[0] for p in pairs)
                d = statistics.median(p[1] for p in pairs)
                print(f"| {name} | {h:.3f} | {d:.3f} | {statistics.median(ratios):.2f} "
                      f"({min(ratios):.2f}–{max(ratios):.2f}) |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/peers/out")
