#!/usr/bin/env python3
"""Summarizes the raw output of bench/per_op/run.sh: per value size and benchmark, each engine's
median (µs/op, or MB/s for readseq and the two-thread fills) and splitkv's throughput ratio to
each peer, computed per round (the rounds interleave the engines) and then the median, with the
range over rounds. A file's last line for a benchmark counts (the scan row's second readseq).
Then, per engine, each two-thread fill's throughput over the one-thread fillrandom of the same
round (1 KiB): whether a second writer adds to or takes from the total.

usage: bench/per_op/summarize.py DIR
"""
import pathlib
import re
import statistics
import sys

LINE = re.compile(r"^(\w+)\s*:\s*([0-9.]+) micros/op;(?:\s+([0-9.]+) MB/s)?")
ORDER = ["fillseq", "fillrandom", "overwrite", "readrandom", "readseq"]
THREADS_LABEL = {
    "t2": " --threads=2",
    "t2same": " --threads=2 --writes=NUM/2 (one thread's keys and total)",
    "rw": " after fillrandom (splitkv: then rewritelog)",
}
TWO_THREADS = ["t2", "t2same"]


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
    return mbs if bench == "readseq" or threads.startswith("t2") else 1.0 / micros


def main(directory):
    runs = load(directory)
    engines = sorted({k[0] for k in runs}, key=lambda e: (e != "splitkv", e))
    peers = [e for e in engines if e != "splitkv"]
    rounds = sorted({k[4] for k in runs})
    header = "| value | benchmark | " + " | ".join(engines) + " | " + " | ".join(f"vs {p}" for p in peers) + " |"
    print(header)
    print("|---|---|" + "---:|" * (len(engines) + len(peers)))
    rows = [(size, "t1", b) for size in (100, 1024) for b in ORDER]
    rows += [(1024, "t2", "fillrandom"), (1024, "t2same", "fillrandom"), (1024, "rw", "readseq")]
    for size, threads, bench in rows:
        cells = []
        for engine in engines:
            values = [runs[k] for k in ((engine, size, threads, bench, r) for r in rounds) if k in runs]
            if not values:
                cells.append("")
                continue
            if bench == "readseq" or threads.startswith("t2"):
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
        name = bench + THREADS_LABEL.get(threads, "")
        print(f"| {size} B | {name} | " + " | ".join(cells) + " |")
    print()
    print("| engine | " + " | ".join(f"`fillrandom{THREADS_LABEL[t]}` / one thread" for t in TWO_THREADS) + " |")
    print("|---|" + "---:|" * len(TWO_THREADS))
    for engine in engines:
        cells = []
        for threads in TWO_THREADS:
            ratios = []
            for r in rounds:
                one, two = runs.get((engine, 1024, "t1", "fillrandom", r)), runs.get((engine, 1024, threads, "fillrandom", r))
                if one and two and one[1] and two[1]:
                    ratios.append(two[1] / one[1])
            cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f})" if ratios else "")
        print(f"| {engine} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
