set -x
B=REPO/target/release/splitkv-bench
D=TMP
O=TMP; mkdir -p $O
for r in 1 2; do
  rm -rf $D; $B --num=1000000 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom,readseq,rewritelog,readseq --db=$D > $O/splitkv-1m-round$r.txt 2>&1
  rm -rf $D; $B --engine=leveldb --num=1000000 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom,readseq,readseq --db=$D > $O/leveldb-1m-round$r.txt 2>&1
done
rm -rf $D; $B --num=2000000 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom,readseq,rewritelog,readseq,readrandom --reads=200000 --memory_limit=512MiB --db=$D > $O/splitkv-2m-capped.txt 2>&1
rm -rf $D; $B --engine=rocksdb --num=2000000 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom,readseq,readseq --memory_limit=512MiB --db=$D > $O/rocksdb-2m-capped.txt 2>&1
rm -rf $D; $B --engine=leveldb --num=2000000 --value_size=1024 --compression_ratio=1 --benchmarks=fillrandom,readseq,readseq --memory_limit=512MiB --db=$D > $O/leveldb-2m-capped.txt 2>&1
rm -rf $D
