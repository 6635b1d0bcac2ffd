#!/usr/bin/env python3
"""Medians and ratios for docs/results/learned.md from bench/learned/run.sh's output directory."""
import glob
import json
import os
import re
import statistics
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "target/bench/learned"

# Part 1: index-lookup tables, median ns per key set over runs.
for per_block in (32, 120):
    rows = {}
    for path in sorted(glob.glob(f"{out}/p1-per{per_block}-run*.txt")):
        for line in open(path):
            f = line.split()
            if len(f) >= 9 and f[0] not in ("keys", "index-lookup:"):
                rows.setdefault(f[0], []).append(f)
    if not rows:
        continue
    print(f"\n### Index step alone, {per_block} entries per block (medians of {len(next(iter(rows.values())))} runs)\n")
    print("| keys | binary ns | learned ns | learned / binary time | binary bytes | learned bytes | size ratio | segments | sub-ranges | max err | mean err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, runs in rows.items():
        b = statistics.median(float(r[1]) for r in runs)
        l = statistics.median(float(r[2]) for r in runs)
        r = runs[0]
        print(f"| {name} | {b:.0f} | {l:.0f} | {l / b:.2f} | {int(r[3]):,} | {int(r[4]):,} | {int(r[3]) / int(r[4]):.1f}x | {r[5]} | {r[6]} | {r[7]} | {r[8]} |")

# Part 2: readrandom end to end.
results = {}
for path in glob.glob(f"{out}/p2-*.json"):
    m = re.match(r"p2-v(\d+)-cache(\w+)-(\w+)-run(\d+)\.json", os.path.basename(path))
    value, cache, engine, _ = m.groups()
    data = json.load(open(path))
    for b in data["benchmarks"]:
        results.setdefault((int(value), cache, engine, b["name"]), []).append(b["micros_per_op"])

engines = ["binary", "learned", "leveldb", "rocksdb"]
for bench in ("readrandom", "fillrandom"):
    print(f"\n### {bench}, micros/op (median of runs; ratios are speedups of splitkv-learned)\n")
    print("| value | block cache | splitkv binary | splitkv learned | LevelDB | RocksDB | learned vs binary | vs LevelDB | vs RocksDB | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for value in (100, 1024):
        for cache in ("default", "1048576"):
            med = {}
            for e in engines:
                v = results.get((value, cache, e, bench))
                med[e] = statistics.median(v) if v else None
            if med["learned"] is None:
                continue
            n = len(results.get((value, cache, "learned", bench), []))
            ratio = lambda e: f"{med[e] / med['learned']:.2f}x" if med[e] else "-"
            cell = lambda e: f"{med[e]:.3f}" if med[e] else "-"
            label = "engine default" if cache == "default" else "1 MiB"
            print(f"| {value} B | {label} | {cell('binary')} | {cell('learned')} | {cell('leveldb')} | {cell('rocksdb')} | {ratio('binary')} | {ratio('leveldb')} | {ratio('rocksdb')} | {n} |")
