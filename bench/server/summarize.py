#!/usr/bin/env python3
"""Medians of the redis-benchmark CSV files written by bench/server/run.sh, as Markdown tables.

    summarize.py RAW_DIR

Files are TARGET-P{pipeline}-round{n}.csv. For each pipelining depth it prints requests per
second (median over rounds, with the min-max spread) and median p50 latency per test and target,
and the ratios splitkv-server / redis-server, single node and 3-node cluster.
"""

import csv
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

TARGETS = ["splitkv", "redis", "splitkv-cluster", "redis-cluster"]


def load(raw):
    # (target, pipeline, test) -> list of (rps, p50 ms)
    runs = defaultdict(list)
    for path in sorted(Path(raw).glob("*-P*-round*.csv")):
        m = re.fullmatch(r"(.+)-P(\d+)-round(\d+)\.csv", path.name)
        if not m:
            continue
        target, pipeline = m.group(1), int(m.group(2))
        with path.open() as f:
            # `--cluster` runs print the node list before the CSV header.
            lines = [line for line in f if line.startswith('"')]
            for row in csv.DictReader(lines):
                test = row["test"].split(" ")[0]
                runs[(target, pipeline, test)].append((float(row["rps"]), float(row["p50_latency_ms"])))
    return runs


def main():
    runs = load(sys.argv[1] if len(sys.argv) > 1 else "docs/results/raw/server")
    tests = []
    for (_, _, test) in runs:
        if test not in tests:
            tests.append(test)
    for pipeline in sorted({p for (_, p, _) in runs}, reverse=True):
        print(f"\n### -P {pipeline}: requests per second, median of rounds (min-max), p50 latency ms\n")
        present = [t for t in TARGETS if any((t, pipeline, x) in runs for x in tests)]
        header = ["test"] + present + ["splitkv / redis", "cluster: splitkv / redis"]
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for test in tests:
            cells = [test]
            med = {}
            for target in present:
                vals = runs.get((target, pipeline, test), [])
                if not vals:
                    cells.append("-")
                    continue
                rps = [v[0] for v in vals]
                med[target] = statistics.median(rps)
                p50 = statistics.median(v[1] for v in vals)
                cells.append(f"{med[target]:,.0f} ({min(rps):,.0f}-{max(rps):,.0f}), p50 {p50:.3f}")
            for a, b in (("splitkv", "redis"), ("splitkv-cluster", "redis-cluster")):
                cells.append(f"{med[a] / med[b]:.2f}x" if a in med and b in med else "-")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
