#!/usr/bin/env python3
"""Summarises and plots the Slot experiments written by run.sh.

Usage: python3 bench/slot/plot.py [OUT_DIR] [PLOT_DIR]
Prints a markdown table (median of the runs per configuration) and writes SVG plots.
"""
import glob
import json
import os
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "bench/slot/out"
PLOTS = sys.argv[2] if len(sys.argv) > 2 else "docs/results/slot"
os.makedirs(PLOTS, exist_ok=True)


def runs(name):
    rows = []
    for path in sorted(glob.glob(f"{OUT}/{name}.run*.txt")):
        text = open(path).read()
        us = re.search(r"fillrandom\s*:\s*([0-9.]+) micros/op;\s*([0-9.]+) MB/s", text)
        st = re.search(r"stalls: slowdown ([0-9.]+) s, stop ([0-9.]+) s", text)
        wa = re.search(r"write amplification ([0-9.]+)", text)
        comp = re.search(r"compaction ([0-9.]+) MiB", text)
        if us:
            rows.append(dict(us=float(us[1]), mbs=float(us[2]), slow=float(st[1]), stop=float(st[2]),
                             wa=float(wa[1]), comp_mib=float(comp[1])))
    return rows


def load(name):
    samples, comps = [], []
    path = f"{OUT}/{name}.jsonl"
    if not os.path.exists(path):
        return samples, comps
    for line in open(path):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        (samples if rec["type"] == "sample" else comps).append(rec)
    comps.sort(key=lambda c: c["t_ms"])
    return samples, comps


def med(rows, key):
    return statistics.median(r[key] for r in rows) if rows else float("nan")


def table(names):
    print("| config | runs | µs/op (median) | MB/s | stall slowdown s | stall stop s | total WA | compaction MiB "
          "| max L1 files | mean WA L0→L1 | mean WA L1→L2 | compactions L0/L1/L2/L3+ |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        rows = runs(name)
        samples, comps = load(name)
        max_l1 = max((s["levels"][1]["files"] for s in samples), default=0)
        real = [c for c in comps if not c["trivial"] and c["reason"] != "manual"]
        def mean_wa(level):
            w = [c["wa"] for c in real if c["level"] == level]
            return f"{statistics.mean(w):.1f}" if w else "-"
        counts = [sum(1 for c in real if c["level"] == l) for l in range(3)]
        counts.append(sum(1 for c in real if c["level"] >= 3))
        print(f"| {name} | {len(rows)} | {med(rows, 'us'):.2f} | {med(rows, 'mbs'):.1f} | {med(rows, 'slow'):.2f} "
              f"| {med(rows, 'stop'):.2f} | {med(rows, 'wa'):.2f} | {med(rows, 'comp_mib'):.0f} | {max_l1} "
              f"| {mean_wa(0)} | {mean_wa(1)} | {'/'.join(map(str, counts))} |")


def plot_levels(pairs, file, title):
    fig, axes = plt.subplots(1, len(pairs), figsize=(6 * len(pairs), 4), sharey=True)
    for ax, (name, label) in zip(axes, pairs):
        samples, _ = load(name)
        if not samples:
            continue
        t = [s["t_ms"] / 1000 for s in samples]
        for level in range(1, len(samples[0]["levels"])):
            ys = [s["levels"][level]["files"] for s in samples]
            if max(ys) > 0:
                ax.plot(t, ys, label=f"L{level}")
        ax.set_title(label)
        ax.set_xlabel("time (s)")
        ax.legend()
    axes[0].set_ylabel("files per level")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(f"{PLOTS}/{file}")
    plt.close(fig)


def plot_l0_wa(pairs, file):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for name, label in pairs:
        _, comps = load(name)
        c0 = [c for c in comps if c["level"] == 0 and not c["trivial"]]
        axes[0].plot(range(len(c0)), [c["wa"] for c in c0], ".", label=label)
        axes[1].plot([c["t_ms"] / 1000 for c in c0], [c["duration_us"] / 1000 for c in c0], ".", label=label)
    axes[0].set_xlabel("L0→L1 compaction #")
    axes[0].set_ylabel("write amplification (L0+L1 input / L0 input)")
    axes[1].set_xlabel("time (s)")
    axes[1].set_ylabel("L0→L1 compaction duration (ms)")
    for ax in axes:
        ax.legend()
    fig.tight_layout()
    fig.savefig(f"{PLOTS}/{file}")
    plt.close(fig)


def plot_sweep(slices, file):
    xs, ys = [], []
    for s in slices:
        rows = runs(f"inline-ts{s}")
        if rows:
            xs.append(s)
            ys.append(med(rows, "mbs"))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, ys, "o-", label="time slice")
    base = runs("inline-score")
    if base:
        ax.axhline(med(base, "mbs"), color="red", linestyle="--", label="score")
    ax.set_xscale("log")
    ax.set_xlabel("slice (ms)")
    ax.set_ylabel("fillrandom MB/s (median of runs)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{PLOTS}/{file}")
    plt.close(fig)


names = ["inline-score", "inline-ts50", "inline-ts200", "inline-ts1000", "inline-ts4000", "inline-ts16000",
         "inline-dyn", "inline-drain70", "inline-dyn-drain70", "inline-score-w2", "inline-ts1000-w2",
         "sep-score", "sep-ts1000"]
table(names)
plot_levels([("inline-score", "score"), ("inline-ts1000", "time slice 1000 ms")], "levels-inline.svg",
            "Files per level, inline values (1M x 100 B)")
plot_levels([("inline-ts50", "time slice 50 ms"), ("inline-ts16000", "time slice 16000 ms")],
            "levels-inline-slices.svg", "Files per level, small vs large slice")
plot_levels([("sep-score", "score"), ("sep-ts1000", "time slice 1000 ms")], "levels-separated.svg",
            "Files per level, values separated (value_threshold=0)")
plot_levels([("inline-score-w2", "score, 2 workers"), ("inline-ts1000-w2", "time slice 1000 ms, 2 workers")],
            "levels-inline-2workers.svg", "Files per level, 2 compaction workers")
plot_l0_wa([("inline-score", "score"), ("inline-ts1000", "time slice 1000 ms")], "l0-compactions-inline.svg")
plot_sweep([50, 200, 1000, 4000, 16000], "slice-sweep.svg")
