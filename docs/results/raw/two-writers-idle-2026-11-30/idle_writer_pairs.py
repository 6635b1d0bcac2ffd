#!/usr/bin/env python3
"""Idle periods that began when a writer thread parked, by where it parked and what the other
writer was doing then (running, or off the CPU and where). Input: `perf script -F
comm,tid,cpu,time,trace,ip,sym` of `perf record -e sched:sched_switch -a --call-graph dwarf,32768`
over a two-writer run. Usage: python3 idle_writer_pairs.py sched.txt"""
import re, sys, collections
H = re.compile(r"(.+?)\s+(\d+) \[(\d+)\]\s+([\d.]+): prev_comm=(.*) prev_pid=(\d+) .* prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)")
events = []; cur = None
for line in open(sys.argv[1]):
    if line.startswith("\t"):
        if cur is not None:
            parts = line.strip().split(None, 1)
            if len(parts) == 2: cur[-1].append(parts[1])
        continue
    m = H.match(line)
    if m:
        cur = [int(m.group(3)), float(m.group(4)), m.group(5), int(m.group(6)), m.group(7), m.group(8), int(m.group(9)), []]
        events.append(cur)
writers = {e[3] for e in events if any('put_unqueued' in f for f in e[7])}
def eng(stack, k=3):
    fr = [f for f in stack if 'splitkv::' in f]
    fr = [re.sub(r'<impl [^>]*>::', '', f) for f in fr]
    fr = [re.sub(r'\{\{closure\}\}| \(inlined\)', '', f).replace('splitkv::','') for f in fr]
    return " < ".join(x[:55] for x in fr[:k])
oncpu = {}; outstack = {}; outstate = {}; last = {}
agg = collections.Counter(); n = collections.Counter()
for cpu, t, prev, ppid, pstate, nxt, npid, stack in events:
    if cpu in last:
        lt, lppid, lnxt, lstack, ctx = last[cpu]
        if lnxt.startswith('swapper') and lppid in writers and ctx:
            agg[ctx] += t - lt; n[ctx] += 1
    ctx = None
    if nxt.startswith('swapper') and ppid in writers:
        why = eng(stack, 2)
        other = [w for w in writers if w != ppid][0]
        if other in oncpu: o = "other writer running"
        else: o = f"other writer off [{outstate.get(other)}] in {eng(outstack.get(other, []), 3)}"
        ctx = f"{why}  ||  {o}"
    oncpu.pop(ppid, None); outstate[ppid] = pstate; outstack[ppid] = stack
    oncpu[npid] = cpu
    last[cpu] = (t, ppid, nxt, stack, ctx)
for k, v in agg.most_common(14):
    print(f"{v:7.3f} s {n[k]:6d}  {k}")
