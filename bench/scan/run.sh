#!/usr/bin/env bash
# Reproduces docs/results/scan.md: range scans with value read-ahead (WiscKey §3.3.1, Figure 12).
#
# Usage (from anywhere): bench/scan/run.sh [acceptance|figure12|scaling|all] [OUT_DIR]
#   acceptance  1M x 1 KiB after fillrandom, default options: readseq and scanrandom for splitkv
#               with and without read-ahead, LevelDB and RocksDB, page cache warm and cold,
#               RUNS interleaved rounds (about 5 minutes on 2 cores with RUNS=3).
#   figure12    readseq vs value size (SIZES, 64 B to 64 KiB) after random and sequential loads,
#               at most TOTAL_BYTES per point, every splitkv value in the log (--value_threshold=0),
#               page cache warm and cold (about 15 minutes).
#   scaling     readseq after fillrandom at 1 KiB for NUMS keys (1M and 4M), warm and cold, to see
#               whether scan cost per entry grows with the data (about 15 minutes).
# Environment: RUNS (3), DB (/tmp/splitkv-scan-db), SIZES, TOTAL_BYTES (268435456), NUMS.
# "cold" runs pass --drop_os_cache=true: before each benchmark the database is closed, evicted
# from the page cache and reopened, so its reads come from the device.
# Every result is a line of OUT_DIR/results.tsv:
#   experiment value_size keys load engine variant cache benchmark MB/s micros/op
# and bench/scan/summarize.py OUT_DIR/results.tsv prints the median tables of scan.md.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

WHAT=${1:-all}
OUT=${2:-$REPO_ROOT/bench/scan/out}
RUNS=${RUNS:-3}
DB=${DB:-/tmp/splitkv-scan-db}
SIZES=${SIZES:-"64 256 1024 4096 16384 65536"}
TOTAL_BYTES=${TOTAL_BYTES:-268435456}
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"

install_packages
build_bench

# Runs the bench and appends one results line per reported benchmark.
# measure EXPERIMENT SIZE KEYS LOAD ENGINE VARIANT CACHE -- bench flags...
measure() {
    local experiment=$1 size=$2 keys=$3 load=$4 engine=$5 variant=$6 cache=$7
    shift 8
    run "$BENCH_BIN" "$@" 2>/dev/null | awk -v prefix="$experiment	$size	$keys	$load	$engine	$variant	$cache" \
        '$2 == ":" && $4 == "micros/op;" { print prefix "\t" $1 "\t" $5 "\t" $3 }' | tee -a "$RESULTS"
}

# Flags of an engine variant: splitkv-prefetch, splitkv-noprefetch, leveldb, rocksdb.
variant_flags() {
    case $1 in
        splitkv-prefetch) echo "--engine=splitkv --prefetch=true" ;;
        splitkv-noprefetch) echo "--engine=splitkv --prefetch=false" ;;
        leveldb) echo "--engine=leveldb" ;;
        rocksdb) echo "--engine=rocksdb" ;;
    esac
}

acceptance() {
    local common="--num=1000000 --value_size=1024 --compression_ratio=1"
    for engine in splitkv leveldb rocksdb; do
        rm -rf "$DB-$engine"
        run "$BENCH_BIN" --engine=$engine $common --db="$DB-$engine" --benchmarks=fillrandom >/dev/null 2>&1
    done
    for round in $(seq 1 "$RUNS"); do
        for variant in splitkv-prefetch splitkv-noprefetch leveldb rocksdb; do
            local engine=${variant%%-*}
            for cache in warm cold; do
                local cold=false
                [[ $cache == cold ]] && cold=true
                local flags="$(variant_flags "$variant") $common --db=$DB-$engine --use_existing_db=1"
                measure acceptance 1024 1000000 fillrandom "$engine" "$variant" "$cache" -- $flags \
                    --drop_os_cache=$cold --benchmarks=readseq,readseq,readseq
                # YCSB E's scans: seek to a random key, then 1 to 100 nexts.
                measure acceptance 1024 1000000 fillrandom "$engine" "$variant" "$cache" -- $flags \
                    --drop_os_cache=$cold --benchmarks=scanrandom --reads=10000
            done
        done
        echo "acceptance round $round done" >&2
    done
    for engine in splitkv leveldb rocksdb; do rm -rf "$DB-$engine"; done
}

# Loads LOAD at SIZE x NUM for each engine and measures readseq warm and cold.
# readseq_grid EXPERIMENT SIZE NUM LOAD
readseq_grid() {
    local experiment=$1 size=$2 num=$3 load=$4
    local common="--num=$num --value_size=$size --compression_ratio=1 --db=$DB"
    for engine in splitkv leveldb rocksdb; do
        local extra=""
        [[ $engine == splitkv && $experiment == figure12 ]] && extra="--value_threshold=0"
        rm -rf "$DB"
        run "$BENCH_BIN" --engine=$engine $extra $common --benchmarks=$load >/dev/null 2>&1
        local variants=$engine
        [[ $engine == splitkv ]] && variants="splitkv-prefetch splitkv-noprefetch"
        for variant in $variants; do
            for cache in warm cold; do
                local cold=false
                [[ $cache == cold ]] && cold=true
                # shellcheck disable=SC2046
                measure "$experiment" "$size" "$num" "$load" "$engine" "$variant" "$cache" -- $(variant_flags "$variant") \
                    $extra $common --use_existing_db=1 --drop_os_cache=$cold --benchmarks=readseq,readseq,readseq
            done
        done
    done
    rm -rf "$DB"
}

figure12() {
    for size in $SIZES; do
        local num=$((TOTAL_BYTES / (size + 16)))
        ((num > 1000000)) && num=1000000
        for load in fillrandom fillseq; do
            readseq_grid figure12 "$size" "$num" "$load"
        done
    done
}

scaling() {
    for num in ${NUMS:-1000000 4000000}; do
        readseq_grid scaling 1024 "$num" fillrandom
    done
}

case $WHAT in
    acceptance) acceptance ;;
    figure12) figure12 ;;
    scaling) scaling ;;
    all) acceptance; figure12; scaling ;;
    *) echo "usage: $0 [acceptance|figure12|scaling|all] [OUT_DIR]" >&2; exit 2 ;;
esac
python3 "$REPO_ROOT/bench/scan/summarize.py" "$RESULTS"
