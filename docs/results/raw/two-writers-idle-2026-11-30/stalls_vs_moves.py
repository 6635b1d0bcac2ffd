#!/usr/bin/env python3
"""Writer stalls for log space in a database LOG, and how much of them fell while a compaction that moved values
ran (a compaction's start is its finish time less its micros). Usage: python3 stalls_vs_moves.py DB/LOG ..."""
import sys, re, datetime
def ts(s): return datetime.datetime.fromisoformat(s.replace('Z','+00:00')).timestamp()
for path in sys.argv[1:]:
    stalls=[]; comps=[]; began=None
    for line in open(path):
        t=line.split()[0]
        if 'write stall began' in line and 'value-log-space' in line: began=ts(t)
        elif 'write stall ended' in line and 'value-log-space' in line and began is not None:
            stalls.append((began, ts(t))); began=None
        elif 'compaction finished' in line:
            m=re.search(r'micros=(\d+)', line); mv=re.search(r'moved_bytes=(\d+)', line)
            end=ts(t); comps.append((end-int(m.group(1))/1e6, end, int(mv.group(1)) if mv else 0))
    total=sum(e-b for b,e in stalls)
    inmove=0
    for b,e in stalls:
        for cb,ce,mv in comps:
            if mv>0:
                inmove+=max(0,min(e,ce)-max(b,cb))
    print(f"{path}: stalls {len(stalls)} total {total*1000:.0f} ms, during move-compactions {inmove*1000:.0f} ms; compactions {len(comps)} with moves {sum(1 for c in comps if c[2]>0)} moved {sum(c[2] for c in comps)/1e6:.0f} MB")
