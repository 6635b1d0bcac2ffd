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
t0=ev[0]['t']
pat=sys.argv[1]; out={}; stacks=collections.Counter(); n=collections.Counter()
for e in ev:
    if e['next'] in out:
        o=out.pop(e['next'])
        if o['t']-t0>=2.2 and any(pat in s for s in o['stack']):
            k='\n   '.join(s[:110] for s in o['stack'] if 'splitkv' in s)[:1500]
            stacks[k]+=e['t']-o['t']; n[k]+=1
    out[e['prev']]=e
for k,v in stacks.most_common(4): print(round(v,3), n[k], '\n  ', k, '\n')
