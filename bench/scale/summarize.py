#!/usr/bin/env python3
"""Summarizes the raw output of bench/scale/run.sh.

usage: bench/scale/summarize.py capped DIR   the capped run: each engine's row and splitkv's
                                             ratios against the goals of docs/results/scale.md
       bench/scale/summarize.py scale DIR    the scale table: per key count and memory regime,
                                             each engine's costs and their growth from the
                                             smallest key count
"""
import pathlib
import re
import sys

BENCH = re.compile(r"^(\w+)\s*:\s*([0-9.]+) micros/op;(?:\s+([0-9.]+) MB/s)?(?:.*\((\d+) of (\d+) found\))?")
READS = re.compile(r"x 4 KiB per op, approx\.; benchmark threads [0-9.]+ MiB, ([0-9.]+|n/a)\)")
PROCESS_READS = re.compile(r"\(([0-9.]+|n/a) x 4 KiB per op")
RSS = re.compile(r"peak RSS ([0-9.]+) MiB")


def parse(path):
    """The file's benchmarks in order, each a dict: name, micros, mbs, found (the share of
    lookups that found their key), reads and thread_reads (x 4 KiB per op: the process's and
    the benchmark threads'), rss (peak MiB)."""
    runs = []
    text = path.read_text()
    lookups = re.search(r"--reads=(\d+)", text.splitlines()[0] if text else "")
    for line in text.splitlines():
        m = BENCH.match(line)
        if m:
            found = int(m.group(4)) / int(lookups.group(1)) if m.group(4) and lookups else None
            runs.append({"name": m.group(1), "micros": float(m.group(2)),
                         "mbs": float(m.group(3)) if m.group(3) else None, "found": found})
        elif line.startswith("  resources:") and runs:
            number = lambda m: float(m.group(1)) if m and m.group(1) != "n/a" else None
            runs[-1]["reads"] = number(PROCESS_READS.search(line))
            runs[-1]["thread_reads"] = number(READS.search(line))
            rss = RSS.search(line)
            runs[-1]["rss"] = float(rss.group(1)) if rss else None
    return runs


def first(runs, name, nth=0):
    matches = [r for r in runs if r["name"] == name]
    return matches[nth] if len(matches) > nth else None


def capped(directory):
    engines = {}
    for path in sorted(pathlib.Path(directory).glob("capped-*.txt")):
        # Only the bench's own output files, which start with their command.
        if path.read_text().startswith("$ splitkv-bench"):
            engines[path.stem.removeprefix("capped-")] = parse(path)
    print("| engine | fillrandom µs (MB/s) | readrandom µs | device reads per lookup: process / lookup threads / per found key | readseq µs/entry (MB/s) | rewritelog s | second readseq µs/entry (MB/s) | peak RSS MiB |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for engine, runs in engines.items():
        fill, look = first(runs, "fillrandom"), first(runs, "readrandom")
        scan1, scan2, rewrite = first(runs, "readseq"), first(runs, "readseq", 1), first(runs, "rewritelog")
        cell = lambda r: f"{r['micros']:.2f} ({r['mbs']:.1f})" if r else ""
        per_found = look["thread_reads"] / look["found"] if look and look.get("thread_reads") is not None and look["found"] else None
        reads = f"{look.get('reads')} / {look.get('thread_reads')} / {per_found:.2f}" if per_found is not None else ""
        rss = max((r.get("rss") or 0) for r in runs)
        if not look:
            print(f"| {engine} | incomplete |")
            continue
        rewrite_s = f"{rewrite['micros'] / 1e6:.1f}" if rewrite else ""
        print(f"| {engine} | {cell(fill)} | {look['micros']:.1f} | {reads} | {cell(scan1)} | {rewrite_s} | {cell(scan2)} | {rss:.0f} |")
    mine = engines.get("splitkv")
    if not mine:
        return
    print()

    def ratio(name, peer, nth=0):
        a, b = first(mine, name, nth), first(engines.get(peer, []), name, nth)
        return b["micros"] / a["micros"] if a and b else None

    def after_rewrite(peer):
        # The peers' second scan re-reads what their first one just cached (readseq reads
        # --reads entries, 200 MB by default, under a 512 MiB cap), so splitkv's scan after its
        # rewrite, which reads from the device, is held against their first scan.
        a, b = first(mine, "readseq", 1), first(engines.get(peer, []), "readseq")
        return b["micros"] / a["micros"] if a and b else None

    goals = [("fillrandom vs LevelDB", ratio("fillrandom", "leveldb"), 5.0),
             ("readrandom vs RocksDB", ratio("readrandom", "rocksdb"), 2.0),
             ("readseq after rewritelog vs LevelDB's first readseq", after_rewrite("leveldb"), 1.0),
             ("readseq after rewritelog vs RocksDB's first readseq", after_rewrite("rocksdb"), 1.5),
             ("first readseq (no rewrite) vs LevelDB", ratio("readseq", "leveldb"), 1.0),
             ("first readseq (no rewrite) vs RocksDB", ratio("readseq", "rocksdb"), 1.5)]
    for name, value, goal in goals:
        shown = f"{value:.2f}x" if value is not None else "n/a"
        verdict = "" if value is None else ("met" if value >= goal else "not met")
        print(f"- splitkv {name}: {shown} (goal >= {goal}x) {verdict}")
    look = first(mine, "readrandom")
    if look and look.get("thread_reads") is not None and look["found"]:
        per_found = look["thread_reads"] / look["found"]
        print(f"- splitkv device reads per found key (lookup threads): {per_found:.2f} (goal <= 1.2) "
              f"{'met' if per_found <= 1.2 else 'not met'}")


def scale(directory):
    table = {}
    for path in pathlib.Path(directory).glob("scale-*-*-*.txt"):
        engine, num, cap = path.stem.removeprefix("scale-").split("-", 2)
        table[(engine, int(num), cap)] = parse(path)
    print("| engine | keys | memory cap | fillrandom µs | readrandom µs | readseq µs/entry | growth from the smallest run (fill / lookup / scan) |")
    print("|---|---:|---|---:|---:|---:|---|")
    for engine, num, cap in sorted(table, key=lambda k: (k[0] != "splitkv", k[0], k[2] != "none", k[1])):
        runs = table[(engine, num, cap)]
        costs = [first(runs, n) for n in ("fillrandom", "readrandom", "readseq")]
        smallest = min(n for (e, n, c) in table if e == engine and (c == "none") == (cap == "none"))
        base_cap = next(c for (e, n, c) in table if e == engine and n == smallest and (c == "none") == (cap == "none"))
        base = [first(table[(engine, smallest, base_cap)], n) for n in ("fillrandom", "readrandom", "readseq")]
        cells = [f"{c['micros']:.2f}" if c else "" for c in costs]
        growth = " / ".join(f"{c['micros'] / b['micros']:.2f}x" if c and b else "n/a" for c, b in zip(costs, base))
        print(f"| {engine} | {num:,} | {cap} | " + " | ".join(cells) + f" | {growth} |")


if __name__ == "__main__":
    {"capped": capped, "scale": scale}[sys.argv[1]](sys.argv[2])
