#!/usr/bin/env python3
"""Summarizes the raw output of bench/per_op/run.sh: per value size and benchmark, each engine's
median (µs/op, or MB/s for readseq and the two-thread fill) and splitkv's throughput ratio to
each peer, computed per round (the rounds interleave the engines) and then the median, with the
range over rounds. A file's last line for a benchmark counts (the scan row's second readseq).

usage: bench/per_op/summarize.py DIR
"""
import pathlib
import re
import statistics
import sys

LINE = re.compile(r"^(\w+)\s*:\s*([0-9.]+) micros/op;(?:\s+([0-9.]+) MB/s)?")
ORDER = ["fillseq", "fillrandom", "overwrite", "readrandom", "readseq"]


def load(directory):
    """{(engine, size, threads, bench, round): (micros, mb_per_s)}"""
    runs = {}
    for path in pathlib.Path(directory).glob("*-round*.txt"):
        engine, size, threads, round_ = path.stem.split("-")
        for line in path.read_text().splitlines():
            m = LINE.match(line)
            if m:
                mbs = float(m.group(3)) if m.group(3) else None
                runs[(engine, int(size), threads, m.group(1), round_)] = (float(m.group(2)), mbs)
    return runs


def throughput(bench, threads, value):
    """A number that grows with speed: MB/s for scans and the two-thread fill, else ops/µs."""
    micros, mbs = value
    return mbs if bench == "readseq" or threads == "t2" else 1.0 / micros


def main(directory):
    runs = load(directory)
    engines = sorted({k[0] for k in runs}, key=lambda e: (e != "splitkv", e))
    peers = [e for e in engines if e != "splitkv"]
    rounds = sorted({k[4] for k in runs})
    header = "| value | benchmark | " + " | ".join(engines) + " | " + " | ".join(f"vs {p}" for p in peers) + " |"
    print(header)
    print("|---|---|" + "---:|" * (len(engines) + len(peers)))
    rows = [(size, "t1", b) for size in (100, 1024) for b in ORDER]
    rows += [(1024, "t2", "fillrandom"), (1024, "rw", "readseq")]
    for size, threads, bench in rows:
        cells = []
        for engine in engines:
            values = [runs[k] for k in ((engine, size, threads, bench, r) for r in rounds) if k in runs]
            if not values:
                cells.append("")
                continue
            if bench == "readseq" or threads == "t2":
                cells.append(f"{statistics.median(v[1] for v in values):.1f} MB/s")
            else:
                cells.append(f"{statistics.median(v[0] for v in values):.3f} µs")
        for peer in peers:
            ratios = []
            for r in rounds:
                mine, theirs = runs.get(("splitkv", size, threads, bench, r)), runs.get((peer, size, threads, bench, r))
                if mine and theirs:
                    ratios.append(throughput(bench, threads, mine) / throughput(bench, threads, theirs))
            cells.append(
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f})" if ratios else "")
        if not any(cells):
            continue
        name = bench + {"t2": " --threads=2", "rw": " after fillrandom (splitkv: then rewritelog)"}.get(threads, "")
        print(f"| {size} B | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
