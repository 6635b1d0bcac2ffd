#!/usr/bin/env python3
"""Turns the JSON and text outputs of bench/hashmode/run.sh into the markdown tables of
docs/results/hashmode.md: absolute figures and ratios against LevelDB from the same run."""
import json
import re
import statistics
import sys
from pathlib import Path

ENGINES = ["hash", "lsm", "leveldb", "rocksdb"]
NAMES = {"hash": "splitkv hash", "lsm": "splitkv LSM", "leveldb": "LevelDB 1.23", "rocksdb": "RocksDB 7.8"}


def load(out, name):
    path = out / f"{name}.json"
    if not path.exists():
        return None
    return {b["name"]: b for b in json.loads(path.read_text())["benchmarks"]}


def kops(bench):
    return bench["ops_per_sec"] / 1000


def ratio(value, base):
    return f"{value / base:.2f}x" if base else "n/a"


def part1(out):
    rows = {e: (load(out, f"p1-random-{e}"), load(out, f"p1-seq-{e}")) for e in ENGINES}
    if not any(r for pair in rows.values() for r in pair):
        return
    base = rows.get("leveldb")
    print("### Random and sequential write and read, 16 B keys, 4 KiB values\n")
    print("| engine | fillrandom kops/s | readrandom kops/s | fillseq kops/s | readseq kops/s |")
    print("|---|---:|---:|---:|---:|")
    cells = [("fillrandom", 0), ("readrandom", 0), ("fillseq", 1), ("readseq", 1)]
    for e, pair in rows.items():
        vals = []
        for name, i in cells:
            bench = pair[i] and pair[i].get(name)
            ref = base and base[i] and base[i].get(name)
            if bench is None:
                vals.append("n/a")
            else:
                vals.append(f"{kops(bench):.1f} ({ratio(kops(bench), kops(ref) if ref else 0)})")
        print(f"| {NAMES[e]} | " + " | ".join(vals) + " |")
    print("\n(ratio to LevelDB in parentheses)\n")


def part2(out):
    sizes = [64, 256, 1024, 4096, 16384, 65536]
    if not any(load(out, f"p2-{s}-hash") for s in sizes):
        return
    print("### Value sizes, fillrandom and readrandom (kops/s, ratio to LevelDB)\n")
    print("| value size | " + " | ".join(f"{NAMES[e]} write" for e in ENGINES) + " | "
          + " | ".join(f"{NAMES[e]} read" for e in ENGINES) + " |")
    print("|---:|" + "---:|" * (2 * len(ENGINES)))
    for s in sizes:
        runs = {e: load(out, f"p2-{s}-{e}") for e in ENGINES}
        cells = []
        for name in ["fillrandom", "readrandom"]:
            base = runs.get("leveldb") and runs["leveldb"].get(name)
            for e in ENGINES:
                b = runs[e] and runs[e].get(name)
                cells.append("n/a" if b is None else f"{kops(b):.1f} ({ratio(kops(b), kops(base) if base else 0)})")
        print(f"| {s} | " + " | ".join(cells) + " |")
    print()


def part3(out):
    rows = []
    for factor in [1, 5]:
        runs = load(out, f"p3-lsa{factor}")
        text = out / f"p3-lsa{factor}.txt"
        if runs is None or not text.exists():
            continue
        raw = json.loads((out / f"p3-lsa{factor}.json").read_text())["benchmarks"]
        over = [b for b in raw if b["name"] == "overwrite"]
        gc = [line for line in text.read_text().splitlines() if line.startswith("GC:")]
        m = re.search(r"read ([\d.]+) MiB, relocated ([\d.]+) MiB, punched ([\d.]+) MiB", gc[-1]) if gc else None
        mbs = sorted(b["mb_per_sec"] for b in over)
        rows.append((factor, mbs, over[-1]["write_amplification"] if over else 0, m.groups() if m else ("?",) * 3))
    if not rows:
        return
    print("### GC cost with logical space amplification (hash mode, 4 KiB values, 3 overwrites)\n")
    print("| logical space | overwrite MB/s (3 runs) | write amp (last overwrite) | GC read MiB | GC relocated MiB | punched MiB |")
    print("|---:|---|---:|---:|---:|---:|")
    for factor, mbs, wa, (read, reloc, punched) in rows:
        print(f"| {factor}x | {' / '.join(f'{v:.0f}' for v in mbs)} | {wa:.2f} | {read} | {reloc} | {punched} |")
    print()


def part4(out):
    """Request shards vs group commit: medians over the rounds, and each run's figure."""
    runs = {}
    for path in sorted(out.glob("p4-*-r*.json")):
        m = re.fullmatch(r"p4-(random|seq)-s(\d+)-t(\d+)-r(\d+)", path.stem)
        if not m:
            continue
        kind, shards, threads = m.group(1), int(m.group(2)), int(m.group(3))
        for name, bench in load(out, path.stem).items():
            runs.setdefault((name, threads, shards), []).append(kops(bench))
    if not runs:
        return
    print("### Request shards vs group commit (hash mode, 16 B keys, 4 KiB values)\n")
    print("kops/s over all client threads, median of the rounds (each round's figure in brackets);")
    print("shards 1 = group commit on the caller's thread.\n")
    print("| benchmark | client threads | shards 1 | shards 2 | shards 4 | 2 vs 1 | 4 vs 1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ["fillrandom", "readrandom", "fillseq", "readseq"]:
        for threads in [1, 2]:
            meds = {}
            cells = []
            for shards in [1, 2, 4]:
                vals = runs.get((name, threads, shards))
                if not vals:
                    cells.append("n/a")
                    continue
                meds[shards] = statistics.median(vals)
                cells.append(f"{meds[shards]:.1f} [{' / '.join(f'{v:.1f}' for v in vals)}]")
            vs = [ratio(meds[s], meds.get(1)) if s in meds else "n/a" for s in (2, 4)]
            print(f"| {name} | {threads} | {' | '.join(cells)} | {vs[0]} | {vs[1]} |")
    print()


def main():
    out = Path(sys.argv[1])
    part1(out)
    part2(out)
    part3(out)
    part4(out)


if __name__ == "__main__":
    main()
