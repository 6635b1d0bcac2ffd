import re,sys,collections
ev=[];cur=None
for line in open('sched.txt'):
    if not line.startswith('\t') and line.strip():
        m=re.match(r'(\S+)\s+(\d+)\s+([\d.]+): prev_comm=(.*) prev_pid=(\d+) .* prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)',line)
        if m:
            cur=dict(t=float(m[3]),prev=int(m[5]),comm=m[4],state=m[6],next=int(m[8]),stack=[]);ev.append(cur)
    elif line.startswith('\t') and cur is not None:
        parts=line.strip().split(None,1)
        if len(parts)==2: cur['stack'].append(parts[1])
t0=ev[0]['t']; tend=ev[-1]['t']
split=float(sys.argv[1]) if len(sys.argv)>1 else 0
out={}; agg=collections.Counter(); tot=collections.Counter()
def key(e):
    fr=[s for s in e['stack'] if 'splitkv' in s and 'std::' not in s[:5]]
    return ' < '.join(f[:70] for f in fr[:3]) or (e['stack'][0][:60] if e['stack'] else '?')
for e in ev:
    if e['next'] in out:
        o=out.pop(e['next'])
        if o['t']-t0>=split:
            d=e['t']-o['t']; agg[(o['comm'],key(o))]+=d; tot[o['comm']]+=d
    out[e['prev']]=e
print('span',round(tend-t0,2))
for c,v in tot.most_common(): print(f'{c:18s} off {v:.2f}s')
for (c,k),v in agg.most_common(45): print(f'{v:6.2f} {c:16s} {k}')
