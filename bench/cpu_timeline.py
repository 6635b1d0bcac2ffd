#!/usr/bin/env python3
"""A benchmark run's CPU over time, by thread group: when the cores sit idle, and who waits.

Runs the given `splitkv-bench` command and, every `--interval` seconds, reads the run time of
each of its threads (`/proc/PID/task/TID/schedstat`, in nanoseconds) and the machine's idle time
(`/proc/stat`), then prints one line per interval: the cores each group of threads used in it
(the benchmark's own threads, which are the writers or readers; GC's threads; the value log's
flusher; flushes and compactions), and the cores the machine left idle or the hypervisor took
(steal time):

    python3 bench/cpu_timeline.py [--interval 0.05] -- target/release/splitkv-bench \\
        --num=500000 --threads=2 --value_size=1024 --compression_ratio=1 \\
        --benchmarks=fillrandom --db=DIR

`bench/cpu_budget.py` gives a run's totals; this shows their shape: a window where the writers
use almost nothing while GC and a compaction use about one core is a stall the second core
did not help with, and the database's LOG names what ran then. The benchmark's own output is
printed first. The database directory given by `--db` is removed first, so each run starts
empty. Linux only.
"""

import argparse
import collections
import os
import subprocess
import tempfile
import time

from bench_command import GROUP_NAMES, fresh_command, program_name, thread_group


def thread_times(pid, program):
    """Run time in nanoseconds and group of each live thread of `pid`, a run of `program`, by
    thread id."""
    times = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return times
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ran = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between the listing and the reads
        times[tid] = (thread_group(comm, program), ran)
    return times


def machine_times():
    """Idle (with I/O wait), stolen and total jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[3] + fields[4], fields[7], sum(fields)


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--interval", type=float, default=0.05, help="seconds per line")
    args.add_argument("command", nargs=argparse.REMAINDER)
    a = args.parse_args()
    command = fresh_command(a.command)
    cores, program = os.cpu_count() or 1, program_name(command)
    # The output goes to a file, not a pipe: a pipe nobody reads until the end would stop a
    # benchmark that prints more than it holds.
    output = tempfile.TemporaryFile("w+")
    child = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True)
    lines = []
    start = last_at = time.monotonic()
    last, (last_idle, last_stolen, last_total) = thread_times(child.pid, program), machine_times()
    while child.poll() is None:
        time.sleep(a.interval)
        now, (idle, stolen, total) = time.monotonic(), machine_times()
        current = thread_times(child.pid, program)
        used = collections.Counter()
        for tid, (name, ran) in current.items():
            before = last[tid][1] if tid in last else 0  # a thread new in this interval
            used[name] += (ran - before) / 1e9 / (now - last_at)
        share = cores / max(1, total - last_total)
        lines.append((now - start, used, (idle - last_idle) * share, (stolen - last_stolen) * share))
        last, last_at, last_idle, last_stolen, last_total = current, now, idle, stolen, total
    output.seek(0)
    print(output.read(), end="")
    print("# seconds, then cores used in the interval by each group and by all of the run, and the")
    print("# machine's cores idle and stolen by the hypervisor (the rest went to other processes)")
    print(f"{'t':>6} " + " ".join(f"{name:>16}" for name in GROUP_NAMES) + f" {'run':>6} {'idle':>6} {'stolen':>6}")
    for at, used, idle, stolen in lines:
        groups = " ".join(f"{used[name]:16.2f}" for name in GROUP_NAMES)
        print(f"{at:6.2f} {groups} {sum(used.values()):6.2f} {idle:6.2f} {stolen:6.2f}")


if __name__ == "__main__":
    main()
