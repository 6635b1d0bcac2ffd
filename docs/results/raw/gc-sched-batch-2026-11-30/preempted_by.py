#!/usr/bin/env python3
"""Time the benchmark's threads spent runnable but off their CPU (switched out in state R), by
the thread that took the CPU from them, from a whole-machine scheduler recording:

    perf record -a -e sched:sched_switch -o sched.data <benchmark command>
    perf script -i sched.data -F comm,tid,cpu,time,trace > sched.txt
    python3 preempted_by.py sched.txt [--comm splitkv-bench]

Call graphs in the recording are ignored. A thread counts from its switch-out in state R
(preempted, or yielded) to its next switch-in.
"""
import argparse
import collections
import re

SWITCH = re.compile(
    r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+): prev_comm=(.*) prev_pid=(\d+) .* prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)"
)


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("script")
    args.add_argument("--comm", default="splitkv-bench")
    a = args.parse_args()
    out = {}
    by = collections.Counter()
    count = collections.Counter()
    for line in open(a.script):
        m = SWITCH.match(line)
        if not m:
            continue
        t, prev_comm, prev_pid, state, next_comm, next_pid = (
            float(m.group(4)), m.group(5), int(m.group(6)), m.group(7), m.group(8), int(m.group(9)))
        if prev_comm == a.comm:
            out[prev_pid] = (t, state, next_comm)
        if next_comm == a.comm and next_pid in out:
            left, state_out, taker = out.pop(next_pid)
            if state_out.startswith("R"):
                name = taker.split("/")[0][:15]
                by[name] += t - left
                count[name] += 1
    print(f"{a.comm} threads runnable off their CPU: {sum(by.values()):.3f} s in all")
    for name, secs in by.most_common(12):
        print(f"  behind {name:16s} {secs:.3f} s in {count[name]} switches")


if __name__ == "__main__":
    main()
