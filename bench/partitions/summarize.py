#!/usr/bin/env python3
"""Prints the tables of docs/results/partitions.md from bench/partitions/run.sh's results.tsv.

Each figure is the median over the runs. Read latencies are micros/op; "after/before" is the
ratio of the read after the delete to the same read before it (1.00 = the delete left reads as
fast as before). Space is the database directory's allocated bytes.

Usage: bench/partitions/summarize.py OUT_DIR/results.tsv
"""
import statistics
import sys
from collections import defaultdict


def main(path):
    cells = defaultdict(list)
    engines = []
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 6:
            continue
        _run, engine, phase, bench, value, _unit = parts
        if engine not in engines:
            engines.append(engine)
        cells[(engine, phase, bench)].append(float(value))
    med = lambda e, p, b: statistics.median(cells[(e, p, b)]) if cells.get((e, p, b)) else None
    fmt = lambda v, f="{:.2f}": "-" if v is None else f.format(v)

    print("| engine | benchmark | before µs/op | after µs/op | after/before | after reclaim µs/op |")
    print("|---|---|---:|---:|---:|---:|")
    for e in engines:
        for b in ("readrandom", "seekrandom", "newiterator"):
            before, after, rec = med(e, "before", b), med(e, "after", b), med(e, "reclaimed", b)
            ratio = after / before if before and after else None
            print(f"| {e} | {b} | {fmt(before)} | {fmt(after)} | {fmt(ratio)}x | {fmt(rec)} |")
    print()
    print("| engine | delete µs per range | disk before MB | after delete MB | after reclaim MB | reclaim s |")
    print("|---|---:|---:|---:|---:|---:|")
    mb = lambda v: None if v is None else v / 1e6
    for e in engines:
        print(
            f"| {e} | {fmt(med(e, 'delete', 'deleterange'))} | {fmt(mb(med(e, 'before', 'disk')), '{:.1f}')} | "
            f"{fmt(mb(med(e, 'deleted', 'disk')), '{:.1f}')} | {fmt(mb(med(e, 'reclaimed', 'disk')), '{:.1f}')} | "
            f"{fmt(med(e, 'reclaim', 'reclaim'))} |"
        )


if __name__ == "__main__":
    main(sys.argv[1])
