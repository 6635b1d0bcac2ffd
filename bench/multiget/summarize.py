#!/usr/bin/env python3
"""Median tables of bench/multiget/run.sh results (a results.tsv path as the only argument).

Prints, per page-cache state, one Markdown table: a row per batch size ("loop" is readrandom, a
loop of gets over the same keys), a column per engine with the median micros per key of every
run (all runs in brackets), then each engine's speed-up over its own loop of gets and splitkv's
ratio to RocksDB (> 1: splitkv is faster).
"""
import statistics
import sys
from collections import defaultdict

ENGINES = ["splitkv", "rocksdb", "leveldb"]
ROWS = ["loop", "1", "8", "32", "128"]


def main(path):
    runs = defaultdict(list)
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 5:
                engine, cache, _benchmark, batch, micros = fields
                runs[(cache, batch, engine)].append(float(micros))
    median = {k: statistics.median(v) for k, v in runs.items()}
    for cache in sorted({k[0] for k in runs}):
        print(f"\n### {cache}: micros per key (median of runs; ratios of medians)\n")
        print("| batch | " + " | ".join(ENGINES) + " | splitkv loop / batch | rocksdb loop / batch"
              " | rocksdb / splitkv |")
        print("|---" * (len(ENGINES) + 4) + "|")
        for batch in [b for b in ROWS if any((cache, b, e) in runs for e in ENGINES)]:
            cells = []
            for engine in ENGINES:
                values = runs.get((cache, batch, engine))
                cells.append(f"{median[(cache, batch, engine)]:.2f} ({', '.join(f'{v:.1f}' for v in values)})"
                             if values else "—")

            def ratio(a, b):
                return f"{median[a] / median[b]:.2f}x" if a in median and median.get(b) else "—"
            print(f"| {batch} | " + " | ".join(cells)
                  + f" | {ratio((cache, 'loop', 'splitkv'), (cache, batch, 'splitkv'))}"
                  + f" | {ratio((cache, 'loop', 'rocksdb'), (cache, batch, 'rocksdb'))}"
                  + f" | {ratio((cache, batch, 'rocksdb'), (cache, batch, 'splitkv'))} |")


if __name__ == "__main__":
    main(sys.argv[1])
