#!/usr/bin/env python3
"""Inclusive frame shares per thread: of each thread's CPU samples, the share whose stack holds a
frame containing each given text.

Record with call graphs, turn the recording into text, then ask about the frames of interest:

    perf record -e cpu-clock -F 1500 --call-graph dwarf,16384 -o cpu.data <command>
    perf script -i cpu.data -F comm,tid,ip,sym > cpu.txt
    python3 bench/frames.py cpu.txt --thread splitkv-gc --thread splitkv-gc-scan \\
        --frame survey_live --frame is_current --frame next_record

A sample counts once under each text its stack holds, so the shares of nested frames overlap
(a caller's share includes its callees'). `perf report --children` gives the same per symbol
for all threads together; this splits them by thread and matches parts of names.
"""

import argparse
import collections


def read_samples(path):
    """(thread name, frames) for every sample of `perf script -F comm,tid,ip,sym` output."""
    samples, current = [], None
    for line in open(path):
        if not line.strip():
            if current:
                samples.append(current)
            current = None
        elif not line[0].isspace():
            current = (line.split()[0], [])
        elif current is not None:
            frame = line.strip().split(None, 1)
            if len(frame) == 2:
                current[1].append(frame[1])
    if current:
        samples.append(current)
    return samples


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("script")
    args.add_argument("--thread", action="append", required=True)
    args.add_argument("--frame", action="append", required=True)
    a = args.parse_args()
    samples = read_samples(a.script)
    per_thread = collections.Counter(comm for comm, _ in samples)
    print("samples by thread:", ", ".join(f"{comm} {n}" for comm, n in per_thread.most_common()))
    for thread in a.thread:
        stacks = [frames for comm, frames in samples if comm == thread]
        print(f"== {thread}: {len(stacks)} samples")
        holding = collections.Counter(text for frames in stacks for text in a.frame if any(text in f for f in frames))
        for text, n in holding.most_common():
            print(f"  {n:5d} {100 * n / max(len(stacks), 1):5.1f}%  {text}")


if __name__ == "__main__":
    main()
