#!/usr/bin/env python3
"""Appends, to a results table written by bench/wisckey_load_lookup or bench/ycsb, the ratio of
splitkv's throughput to each peer's (>1 means splitkv is faster).

usage: bench/ratios.py wisckey|ycsb RESULTS.md
"""
import re
import sys


def rows(path, header_prefix):
    out = []
    for line in open(path):
        if line.startswith("| ") and not line.startswith(header_prefix):
            out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def number(cell):
    m = re.match(r"([0-9.]+)", cell)
    return float(m.group(1)) if m else None


def ratio(a, b):
    return "n/a" if a is None or not b else f"{a / b:.2f}x"


def wisckey(path):
    data = {(int(c[0]), c[1]): (number(c[2]), number(c[7])) for c in rows(path, "| value")}
    peers = sorted({e for _, e in data if e != "splitkv"})
    lines = ["", "splitkv relative to each peer (throughput ratio; >1 means splitkv is faster):", ""]
    lines.append("| value size | " + " | ".join(f"load vs {p}" for p in peers) + " | "
                 + " | ".join(f"lookup vs {p}" for p in peers) + " |")
    lines.append("|---:|" + "---:|" * (2 * len(peers)))
    for size in sorted({s for s, _ in data}):
        mine = data.get((size, "splitkv"))
        if mine is None:
            continue
        loads = [ratio(mine[0], data.get((size, p), (None, None))[0]) for p in peers]
        lookups = [ratio(mine[1], data.get((size, p), (None, None))[1]) for p in peers]
        lines.append(f"| {size} | " + " | ".join(loads + lookups) + " |")
    return lines


def ycsb(path):
    names = ["load", "A", "B", "C", "F", "D", "E"]
    data = {(c[0], c[1]): [number(x) for x in c[2:9]] for c in rows(path, "| record")}
    lines = ["", "splitkv relative to each peer (throughput ratio; >1 means splitkv is faster):", ""]
    lines.append("| record | vs | " + " | ".join(names) + " |")
    lines.append("|---|---|" + "---:|" * len(names))
    for record in dict.fromkeys(r for r, _ in data):
        mine = data.get((record, "splitkv"))
        if mine is None:
            continue
        for (rec, peer), theirs in data.items():
            if rec == record and peer != "splitkv":
                lines.append(f"| {record} | {peer} | " + " | ".join(ratio(a, b) for a, b in zip(mine, theirs)) + " |")
    return lines


if __name__ == "__main__":
    kind, path = sys.argv[1], sys.argv[2]
    extra = wisckey(path) if kind == "wisckey" else ycsb(path)
    with open(path, "a") as f:
        f.write("\n".join(extra) + "\n")
