"""Summarizes bench/gc_in_compaction/run.sh: per benchmark, each setting's median micros/op,
the ratio of the medians and each round's ratio (>1: --gc_in_compaction=true is faster), and
what GC and the compactions relocated."""
import re
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
runs = {}  # (moves, round) -> text
for f in sorted(out.glob("moves-*-round*.txt")):
    m = re.match(r"moves-(true|false)-round(\d+)\.txt", f.name)
    runs[(m.group(1), int(m.group(2)))] = f.read_text()
rounds = sorted({r for _, r in runs})


def micros(text, bench):
    m = re.search(rf"^{bench}\s+:\s+([\d.]+) micros/op", text, re.M)
    return float(m.group(1)) if m else None


def mib(text, pattern):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else 0.0


print("| benchmark | GC only µs/op (median) | with moves µs/op (median) | ratio | per round |")
print("|---|---|---|---|---|")
for bench in ["fillrandom", "overwrite"]:
    off = [micros(runs[("false", r)], bench) for r in rounds]
    on = [micros(runs[("true", r)], bench) for r in rounds]
    per_round = " / ".join(f"{a / b:.2f}x" for a, b in zip(off, on))
    print(f"| {bench} | {statistics.median(off):.2f} | {statistics.median(on):.2f} | "
          f"{statistics.median(off) / statistics.median(on):.2f}x | {per_round} |")
print()
print("| setting | round | GC relocated MiB | compactions moved MiB | writers' GC stall s | surveys s |")
print("|---|---|---|---|---|---|")
RELOCATED = r"relocated ([\d.]+) MiB"
MOVED = r"Compactions moved \d+ values \(([\d.]+) MiB\)"
STALL = r"gc ([\d.]+) s"
SURVEYS = r"surveys \(([\d.]+) s\)"
for (moves, r), text in sorted(runs.items()):
    cells = [f"{mib(text, RELOCATED):.0f}", f"{mib(text, MOVED):.0f}", f"{mib(text, STALL):.1f}", f"{mib(text, SURVEYS):.1f}"]
    print(f"| moves={moves} | {r} | " + " | ".join(cells) + " |")
