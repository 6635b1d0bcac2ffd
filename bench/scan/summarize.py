#!/usr/bin/env python3
"""Median tables of bench/scan/run.sh results (a results.tsv path as the only argument).

Prints, per experiment, one Markdown table: a row per (value size, keys, load, cache), a column per
engine variant with the median MB/s of every run (all runs in brackets), and the ratios the
acceptance criteria name: splitkv with read-ahead over LevelDB and over splitkv without it.
"""
import statistics
import sys
from collections import defaultdict

VARIANTS = ["splitkv-prefetch", "splitkv-noprefetch", "leveldb", "rocksdb"]


def main(path):
    runs = defaultdict(list)
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 10:
                continue
            experiment, size, keys, load, _engine, variant, cache, benchmark, mbps, _us = fields
            runs[(experiment, benchmark, int(size), int(keys), load, cache, variant)].append(float(mbps))
    tables = sorted({(k[0], k[1]) for k in runs})
    for experiment, benchmark in tables:
        print(f"\n### {experiment}: {benchmark} (MB/s, median of runs; ratios of medians)\n")
        print("| value | keys | load | cache | " + " | ".join(VARIANTS) + " | prefetch / LevelDB | prefetch / no prefetch |")
        print("|---" * (len(VARIANTS) + 6) + "|")
        rows = sorted({k[2:6] for k in runs if k[:2] == (experiment, benchmark)})
        for size, keys, load, cache in rows:
            medians = {}
            cells = []
            for variant in VARIANTS:
                values = runs.get((experiment, benchmark, size, keys, load, cache, variant), [])
                if values:
                    medians[variant] = statistics.median(values)
                    all_runs = ", ".join(f"{v:.0f}" for v in values)
                    cells.append(f"{medians[variant]:.0f} ({all_runs})")
                else:
                    cells.append("—")
            def ratio(a, b):
                return f"{medians[a] / medians[b]:.2f}x" if a in medians and medians.get(b) else "—"
            print(f"| {size} B | {keys:,} | {load} | {cache} | " + " | ".join(cells)
                  + f" | {ratio('splitkv-prefetch', 'leveldb')} | {ratio('splitkv-prefetch', 'splitkv-noprefetch')} |")


if __name__ == "__main__":
    main(sys.argv[1])
