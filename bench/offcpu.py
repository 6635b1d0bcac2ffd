#!/usr/bin/env python3
"""Where threads wait: off-CPU time per thread and blocking stack, from scheduler switches.

Record the run, then turn the recording into text and read it with this script:

    perf record -e sched:sched_switch --call-graph dwarf,16384 -o sched.data <command>
    perf script -i sched.data -F comm,tid,time,trace,ip,sym > sched.txt
    python3 bench/offcpu.py sched.txt [--from SECONDS] [--thread NAME | --frame TEXT] [--top N]

Each switch-out of a thread starts a wait, and its next switch-in ends it. Without `--thread`
or `--frame`, the script prints each thread's total time off the CPU, then the longest waits
grouped by thread and by the first three engine frames of the blocking stack. `--thread NAME`
groups one thread's waits by their whole engine stack. `--frame TEXT` does the same for the waits
of every thread whose stack has a frame containing TEXT. `--from` skips the waits that begin
earlier than SECONDS after the first switch, for example a load before the step of interest.

`--by-next` (with `--thread` or `--frame`) groups the waits instead by how the thread left the
CPU (a `sched_yield`; a wake, preempted while waking another thread; or its scheduler state: R
preempted, S asleep) and by the thread that ran next on that CPU (then by the first two engine
frames, or as many as `--frames` says; with `--frames 0`, by how and what ran next alone): a wait
that yields to work that has to run anyway is not idle time, one that leaves the CPU to nobody
(`swapper`) is.

`--idle` instead measures the idle time of the CPUs: record the whole machine (`perf record -a`)
and keep each switch's CPU (`perf script -F comm,tid,cpu,time,trace,ip,sym`). Each switch to
the idle task starts an idle period on its CPU that ends at that CPU's next switch; the period
is charged to the thread that left the CPU, grouped by thread, scheduler state and the first two
engine frames of its stack: what the engine was waiting for while a core did nothing. Only
periods between the engine's first and last switch count.
"""

import argparse
import collections
import re

HEADER = re.compile(
    r"(\S+)\s+(\d+)\s+(?:\[(\d+)\]\s+)?([\d.]+): prev_comm=(.*) prev_pid=(\d+) .* prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)"
)


def read_switches(path):
    """The switches in order, each with the stack of the thread that left the CPU."""
    switches = []
    for line in open(path):
        if line.startswith("\t"):
            frame = line.strip().split(None, 1)
            if switches and len(frame) == 2:
                switches[-1]["stack"].append(frame[1])
        elif line.strip():
            m = HEADER.match(line)
            if m:
                switches.append(
                    {
                        "cpu": None if m[3] is None else int(m[3]),
                        "t": float(m[4]),
                        "comm": m[5],
                        "prev": int(m[6]),
                        "state": m[7],
                        "next_comm": m[8].strip(),
                        "next": int(m[9]),
                        "stack": [],
                    }
                )
    return switches


def waits(switches, start):
    """(switch out, seconds) for every wait that begins `start` seconds or more in."""
    t0 = switches[0]["t"]
    left = {}
    for s in switches:
        out = left.pop(s["next"], None)
        if out is not None and out["t"] - t0 >= start:
            yield out, s["t"] - out["t"]
        left[s["prev"]] = s


def how_and_next(out):
    """How a thread left the CPU, and what ran there next (`--by-next`)."""
    stack = " ".join(out["stack"][:12])
    if "sched_yield" in stack:
        how = "yield"
    elif any(word in stack for word in ("futex_wake", "unpark", "::unlock")):
        how = "wake"  # preempted while waking another thread (often by that thread)
    else:
        how = out["state"]
    return f"{how:5s} next: {out['next_comm'].split('/')[0]}"


def engine_frames(stack):
    return [f for f in stack if "splitkv" in f]


def engine_place(stack, frames, width):
    """The first `frames` engine frames of `stack`, innermost first, each cut to `width`."""
    return " < ".join(f[:width] for f in engine_frames(stack)[:frames])


def engine_span(switches):
    """First and last time an engine thread switched, so that other processes' time is left out."""
    engine = [s["t"] for s in switches if s["comm"].startswith("splitkv")]
    return (engine[0], engine[-1]) if engine else (0.0, 0.0)


def idle_periods(switches, first, last):
    """(the switch that left a CPU idle, seconds idle) for every idle period that began between
    `first` and `last`."""
    if any(s["cpu"] is None for s in switches):
        raise SystemExit("--idle needs each switch's CPU: perf script -F comm,tid,cpu,time,trace,ip,sym")
    went_idle = {}
    for s in switches:
        out = went_idle.pop(s["cpu"], None)
        if out is not None and first <= out["t"] <= last:
            yield out, s["t"] - out["t"]
        if s["next_comm"].startswith("swapper"):
            went_idle[s["cpu"]] = s


def print_idle(switches, top):
    """`--idle`: the CPUs' idle time, charged to what the thread that left each one waited for."""
    first, last = engine_span(switches)
    by_wait, count = collections.Counter(), collections.Counter()
    for out, secs in idle_periods(switches, first, last):
        key = f"{re.sub(r'[0-9/:]+$', '', out['comm'])} [{out['state']}] {engine_place(out['stack'], 2, 60)}"
        by_wait[key] += secs
        count[key] += 1
    cpus = len({s["cpu"] for s in switches})
    span = last - first
    print(f"span {span:.2f} s on {cpus} CPUs; idle {sum(by_wait.values()):.3f} s of {span * cpus:.2f} CPU-seconds")
    for key, secs in by_wait.most_common(top):
        print(f"{secs:7.3f} s in {count[key]:5d} periods  {key}")


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("sched")
    args.add_argument("--from", dest="start", type=float, default=0.0)
    args.add_argument("--thread")
    args.add_argument("--frame")
    args.add_argument("--top", type=int, default=40)
    args.add_argument("--by-next", action="store_true")
    args.add_argument("--frames", type=int, default=2, help="engine frames in each --by-next group (0: none)")
    args.add_argument("--idle", action="store_true")
    a = args.parse_args()
    switches = read_switches(a.sched)
    if a.idle:
        print_idle(switches, a.top)
        return
    if a.thread or a.frame:
        by_stack, count = collections.Counter(), collections.Counter()
        for out, secs in waits(switches, a.start):
            comm, stack = out["comm"], out["stack"]
            if (a.thread and comm != a.thread) or (a.frame and not any(a.frame in f for f in stack)):
                continue
            if a.by_next:
                place = engine_place(stack, a.frames, 70)
                key = how_and_next(out) + (f"\n   {place}" if place else "")
            else:
                key = "\n   ".join(f[:120] for f in engine_frames(stack)) or (stack[0] if stack else "?")
            by_stack[key] += secs
            count[key] += 1
        for key, secs in by_stack.most_common(a.top):
            print(f"{secs:.3f} s in {count[key]} waits\n   {key}\n")
        return
    per_thread, by_place = collections.Counter(), collections.Counter()
    for out, secs in waits(switches, a.start):
        comm, stack = out["comm"], out["stack"]
        place = engine_place(stack, 3, 70) or (stack[0][:60] if stack else "?")
        per_thread[comm] += secs
        by_place[(comm, place)] += secs
    print(f"span {switches[-1]['t'] - switches[0]['t']:.2f} s")
    for comm, secs in per_thread.most_common():
        print(f"{comm:18s} off {secs:.2f} s")
    for (comm, place), secs in by_place.most_common(a.top):
        print(f"{secs:6.2f} {comm:16s} {place}")


if __name__ == "__main__":
    main()
