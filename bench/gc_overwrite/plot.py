#!/usr/bin/env python3
"""Space and write amplification over time for bench/gc_overwrite/run.sh (no dependencies).

For each runN.json (the benchmark's --json report) it reads runN.jsonl (the engine samples of
--stats_dump) and writes gc_overwrite.svg next to them: space amplification (bytes on disk / live
key and value bytes) and cumulative write amplification (bytes the engine wrote / user bytes)
against user GiB written. Live bytes are exact at the end of each benchmark (the harness tracks
every write) and interpolated in user bytes between them. It also prints, per benchmark, the
median over runs of the end-of-benchmark figures and of the highest sampled space amplification.
"""
import json
import statistics
import sys
from pathlib import Path

W, H, PAD = 760, 300, 50
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def load(report_path):
    report = json.loads(Path(report_path).read_text())
    benches = report["benchmarks"]
    ends, lives, done = [0.0], [0.0], 0.0
    for b in benches:
        done += b["user_bytes_written"]
        ends.append(done)
        lives.append(float(b["live_user_bytes"] or 0))
    samples = []
    for line in Path(report_path).with_suffix(".jsonl").read_text().splitlines():
        s = json.loads(line)
        if s.get("type") != "sample" or s["user_bytes"] == 0:
            continue
        live = interpolate(s["user_bytes"], ends, lives)
        if live < 0.2 * lives[-1]:
            continue
        samples.append((s["user_bytes"] / 2**30, s["disk_bytes"] / live, s["write_amp"]))
    return benches, samples


def interpolate(x, xs, ys):
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / max(x1 - x0, 1)
    return ys[-1]


def panel(runs, index, title, top, y_max):
    x_max = max(s[0] for run in runs for s in run) or 1
    px = lambda x: PAD + (W - 2 * PAD) * x / x_max
    py = lambda y: top + H - PAD - (H - 2 * PAD) * y / y_max
    out = [f'<text x="{W / 2}" y="{top + 20}" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{PAD}" y1="{py(0)}" x2="{W - PAD}" y2="{py(0)}" stroke="black"/>',
           f'<line x1="{PAD}" y1="{py(0)}" x2="{PAD}" y2="{py(y_max)}" stroke="black"/>']
    for tick in range(0, int(y_max * 2) + 1):
        y = tick / 2
        out.append(f'<text x="{PAD - 6}" y="{py(y) + 4}" text-anchor="end" font-size="10">{y:.1f}</text>')
        out.append(f'<line x1="{PAD}" y1="{py(y)}" x2="{W - PAD}" y2="{py(y)}" stroke="#ddd"/>')
    for gib in range(0, int(x_max) + 1):
        out.append(f'<text x="{px(gib)}" y="{py(0) + 14}" text-anchor="middle" font-size="10">{gib}</text>')
    out.append(f'<text x="{W / 2}" y="{py(0) + 30}" text-anchor="middle" font-size="11">user GiB written</text>')
    for n, run in enumerate(runs):
        points = " ".join(f"{px(s[0]):.1f},{py(min(s[index], y_max)):.1f}" for s in run)
        out.append(f'<polyline fill="none" stroke="{COLORS[n % len(COLORS)]}" points="{points}"/>')
    return out


def main(paths):
    loaded = [load(p) for p in paths]
    runs = [samples for _, samples in loaded]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{2 * H}" font-family="sans-serif">']
    svg += panel(runs, 1, "space amplification (one line per run)", 0, 3.0)
    svg += panel(runs, 2, "cumulative write amplification", H, 3.0)
    svg.append("</svg>")
    out = Path(paths[0]).parent / "gc_overwrite.svg"
    out.write_text("\n".join(svg))
    print(f"wrote {out}")
    names = [b["name"] for b in loaded[0][0]]
    print("benchmark | MB/s | write amp | space amp at end | highest sampled space amp")
    ends = [0.0]
    for b in loaded[0][0]:
        ends.append(ends[-1] + b["user_bytes_written"] / 2**30)
    for i, name in enumerate(names):
        med = lambda key: statistics.median(r[0][i][key] or 0 for r in loaded)
        peak = statistics.median(
            max((s[1] for s in r[1] if ends[i] <= s[0] <= ends[i + 1]), default=float("nan")) for r in loaded)
        print(f"{name} | {med('mb_per_sec'):.1f} | {med('write_amplification'):.2f} | "
              f"{med('space_amplification'):.2f} | {peak:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
