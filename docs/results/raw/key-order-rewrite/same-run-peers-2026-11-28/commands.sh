set -x
B=REPO/target/release/splitkv-bench
D=TMP/db
O=TMP/out; mkdir -p $O
for r in 1 2 3; do
  rm -rf $D; $B --num=1000000 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom,readseq,rewritelog,readseq,readseq --db=$D > $O/splitkv-1m-round$r.txt 2>&1
  rm -rf $D; $B --engine=leveldb --num=1000000 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom,readseq,readseq --db=$D > $O/leveldb-1m-round$r.txt 2>&1
done
rm -rf $D
