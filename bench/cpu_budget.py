#!/usr/bin/env python3
"""Where a benchmark run's CPU goes, by thread group: core-seconds and cores kept busy.

Runs the given `splitkv-bench` command under `perf record -e cpu-clock`, then sums the samples of
each group of threads (the benchmark's own threads, which are the writers or readers; GC's
threads; the value log's flusher; flushes and compactions; anything else) and prints one line:

    python3 bench/cpu_budget.py [--label NAME] -- target/release/splitkv-bench --num=500000 \\
        --threads=2 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom --db=DIR

The wall time is the benchmark's own: its first line's micros/op times the operations each
thread ran (`--writes` if given, else `--num`), so opening and closing the database are left
out; "busy" is all the run's CPU over that wall time (at most 2 on two cores, a little more
when the open and close add CPU of their own). The database directory given by `--db` is
removed first, so each run starts empty.
"""

import argparse
import re
import subprocess
import sys
import tempfile

from bench_command import GROUP_NAMES, flag, fresh_command, program_name, thread_group


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--label", default="run")
    args.add_argument("command", nargs=argparse.REMAINDER)
    a = args.parse_args()
    command = fresh_command(a.command)
    with tempfile.NamedTemporaryFile(suffix=".data") as data:
        run = subprocess.run(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", data.name, *command],
            capture_output=True,
            text=True,
            check=True,
        )
        report = subprocess.run(
            ["perf", "report", "-i", data.name, "--no-children", "--sort", "comm", "-g", "none", "--stdio"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    micros = re.search(r"^\S+\s+:\s+([\d.]+) micros/op", run.stdout, re.M)
    if micros is None:
        sys.exit("no micros/op line in the benchmark's output:\n" + run.stdout + run.stderr)
    ops = int(flag(command, "writes") or flag(command, "num") or 1_000_000)
    wall = float(micros[1]) * ops / 1e6
    total = float(re.search(r"Event count \(approx.\): (\d+)", report)[1]) / 1e9
    cores = dict.fromkeys(GROUP_NAMES, 0.0)
    program = program_name(command)
    for share, comm in re.findall(r"^\s+([\d.]+)%\s+(\S+)", report, re.M):
        cores[thread_group(comm, program)] += float(share) / 100 * total
    parts = "  ".join(f"{name} {secs:.2f}" for name, secs in cores.items())
    print(f"{a.label:10s} wall {wall:.2f} s  {parts}  all {total:.2f}  busy {total / wall:.2f}")


if __name__ == "__main__":
    main()
