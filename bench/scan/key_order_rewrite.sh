#!/usr/bin/env bash
# Reproduces the "Key-order rewrite" section of docs/results/scan.md: readseq at 1M x 1 KiB after
# fillrandom, before and after the key-order value-log rewrite (benchmark `rewritelog`), page
# cache warm and cold, and YCSB E (short scans) before and after; RUNS rounds (3).
#
# Usage: bench/scan/key_order_rewrite.sh [OUT_DIR]   (one raw file per round and process)
# Environment: RUNS (3), DB (/tmp/splitkv-rewrite-db), BENCH_BIN (target/release/splitkv-bench,
# built with `cargo build --release -p splitkv-bench`), NUM (1000000), YCSB_OPS (20000).
# "cold" passes --drop_os_cache=true: the database is closed, evicted from the page cache and
# reopened before the benchmark, so its reads come from the device (needs root).
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${1:-$REPO_ROOT/bench/scan/out-rewrite}
RUNS=${RUNS:-3}
DB=${DB:-/tmp/splitkv-rewrite-db}
BENCH_BIN=${BENCH_BIN:-$REPO_ROOT/target/release/splitkv-bench}
NUM=${NUM:-1000000}
YCSB_OPS=${YCSB_OPS:-20000}
mkdir -p "$OUT"

bench() { "$BENCH_BIN" --db="$DB" --num="$NUM" --value_size=1024 --compression_ratio=1 "$@" 2>&1; }

for round in $(seq 1 "$RUNS"); do
    # Load, then readseq warm (twice), cold, rewrite, readseq warm (twice), cold.
    bench --benchmarks=fillrandom,readseq,readseq,stats >"$OUT/round$round-1-load-before-warm.txt"
    bench --use_existing_db=1 --drop_os_cache=true --benchmarks=readseq >"$OUT/round$round-2-before-cold.txt"
    bench --use_existing_db=1 --benchmarks=rewritelog,readseq,readseq,stats >"$OUT/round$round-3-rewrite-after-warm.txt"
    bench --use_existing_db=1 --drop_os_cache=true --benchmarks=readseq >"$OUT/round$round-4-after-cold.txt"
    # YCSB E: 1M records of 1000 bytes loaded in hashed-key order, scans before and after.
    bench --ycsb_records="$NUM" --ycsb_ops="$YCSB_OPS" --benchmarks=ycsb_load,ycsb_e,rewritelog,ycsb_e \
        >"$OUT/round$round-5-ycsb-e.txt"
done
rm -rf "$DB"
# Sanitize: no machine-specific paths in committed output.
sed -i "s#$DB#DB#g; s#$REPO_ROOT/##g" "$OUT"/*.txt
grep -h -E "^(fillrandom|readseq|rewritelog|ycsb_e|ycsb_load) " "$OUT"/round*.txt
