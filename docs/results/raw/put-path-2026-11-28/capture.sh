#!/bin/bash
# Captures where a 1M x 1 KiB fillrandom spends its time: CPU per thread (perf), scheduler
# accounting per long-lived thread (/proc/PID/task/*/schedstat), sync calls (strace), and a
# process time summary. Usage: capture.sh BENCH OUTDIR
B=$1; O=$2; mkdir -p $O
W=$(mktemp -d)
ARGS="--num=1000000 --value_size=1024 --benchmarks=fillrandom,stats"
rm -rf $W/db; /usr/bin/time -v $B $ARGS --db=$W/db > $O/time.txt 2>&1
rm -rf $W/db; perf record -e cpu-clock -F 2000 -o $W/fr.perf -- $B $ARGS --db=$W/db > $O/perf-run.txt 2>&1
perf report -i $W/fr.perf --sort comm --stdio 2>/dev/null | grep -v "^$" > $O/perf-threads.txt
perf report -i $W/fr.perf --no-children --sort comm,dso,sym --stdio 2>/dev/null | grep -v "^$" | head -120 > $O/perf-symbols.txt
rm -rf $W/db; $B $ARGS --db=$W/db > $O/schedstat-run.txt 2>&1 & P=$!
declare -A last
while kill -0 $P 2>/dev/null; do for t in /proc/$P/task/*; do n=$(cat $t/comm 2>/dev/null); s=$(cat $t/schedstat 2>/dev/null); [ -n "$s" ] && last[$(basename $t)-$n]="$s"; done; sleep 0.05; done
{ echo "# thread: on-CPU seconds, seconds runnable but waiting for a CPU, time slices (last /proc/PID/task/TID/schedstat seen; threads that exit between samples are missed)"; for k in "${!last[@]}"; do echo "$k ${last[$k]}"; done | awk '{printf "%-30s run %.2f s  runqueue-wait %.2f s  slices %d\n",$1,$2/1e9,$3/1e9,$4}' | sort; } > $O/schedstat.txt
rm -rf $W/db; strace -f -T -e trace=fsync,fdatasync,sync_file_range,openat -o $W/st.txt $B $ARGS --db=$W/db > $O/strace-run.txt 2>&1
python3 - $W/st.txt > $O/strace-sync-summary.txt <<'PY'
import re,collections,sys
tot=collections.defaultdict(float); n=collections.Counter(); fdfile={}
for l in open(sys.argv[1]):
    m=re.match(r'(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+).*<([\d.]+)>',l)
    if not m: continue
    tid,call,args,ret,t=m.groups()
    if call=='openat':
        f=re.search(r'"([^"]+)"',args); fdfile[ret]=f.group(1).split('/')[-1] if f else '?'; continue
    kind=re.sub(r'\d+','N',fdfile.get(args.split(',')[0],'?'))
    tot[(tid,call,kind)]+=float(t); n[(tid,call,kind)]+=1
print("# thread id, call, file (digits as N), calls, seconds inside the call (strace -T; the run itself is slower under strace)")
for k in sorted(tot,key=lambda k:-tot[k])[:20]: print(*k, n[k], round(tot[k],3))
PY
sed -i -E "s#$W#TMP#g; s#$PWD#REPO#g" $O/*.txt
rm -rf "$W"
