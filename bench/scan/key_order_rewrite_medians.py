"""Medians of bench/scan/key_order_rewrite.sh's raw output (docs/results/scan.md, "Key-order rewrite").

Usage: python3 bench/scan/key_order_rewrite_medians.py OUT_DIR
Prints one Markdown table row per figure: the median over rounds, then each round's value.
"""
import sys,re,glob,statistics
d=sys.argv[1]
rows={}
for r in (1,2,3):
    def lines(f):
        try: return [l for l in open(glob.glob(f"{d}/round{r}-{f}*.txt")[0]) if re.match(r'^(fillrandom|readseq|rewritelog|ycsb_e|ycsb_load) ',l)]
        except IndexError: return []
    def mbs(l): return float(re.search(r'([\d.]+) MB/s',l).group(1))
    def us(l): return float(re.search(r'([\d.]+) micros/op',l).group(1))
    a=lines('1'); b=lines('2'); c=lines('3'); e=lines('4'); y=lines('5')
    if not a: continue
    vals={'fillrandom MB/s':mbs(a[0]),'readseq before warm (2nd) MB/s':mbs(a[2]),'readseq before cold MB/s':mbs(b[0]),
          'rewrite s':us(c[0])/1e6,'rewrite MB/s':mbs(c[0]),'readseq after warm (2nd) MB/s':mbs(c[2]),'readseq after cold MB/s':mbs(e[0]),
          'ycsb_e before us/op':us(y[1]),'ycsb_e before MB/s':mbs(y[1]),'ycsb rewrite s':us(y[2])/1e6,'ycsb_e after us/op':us(y[3]),'ycsb_e after MB/s':mbs(y[3])}
    for k,v in vals.items(): rows.setdefault(k,[]).append(v)
for k,v in rows.items():
    print(f"| {k} | {statistics.median(v):.2f} | {', '.join(f'{x:.2f}' for x in v)} |")
