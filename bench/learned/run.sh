#!/usr/bin/env bash
# TridentKV's learned index blocks at this machine's scale (docs/results/learned.md):
#   1. the index step alone (index-lookup): binary vs learned on six key sets, 100-byte values
#      (32 entries per 4 KiB block) and value pointers (120 per block), RUNS runs each;
#   2. readrandom end to end, 16-byte keys, NUM keys, 100 B and 1 KiB values, with the default
#      block cache and with one of 1 MiB (smaller than the index blocks), for splitkv with
#      binary and with learned index blocks, LevelDB and RocksDB, RUNS rounds interleaved.
#
# Environment:
#   NUM      keys in part 2 (default 1000000)
#   READS    random reads per readrandom (default 1000000)
#   RUNS     repetitions (default 3)
#   OUT      output directory (default target/bench/learned)
#   DB_DIR   where databases are made (default a temporary directory)
#   PARTS    which parts to run (default "1 2")
source "$(dirname "$0")/../common.sh"

NUM=${NUM:-1000000}
READS=${READS:-1000000}
RUNS=${RUNS:-3}
OUT=${OUT:-$REPO_ROOT/target/bench/learned}
DB_DIR=${DB_DIR:-$(mktemp -d -t splitkv-learned-XXXXXX)}
PARTS=${PARTS:-"1 2"}

install_packages
build_bench
mkdir -p "$OUT"

if [[ " $PARTS " == *" 1 "* ]]; then
    for per_block in 32 120; do
        for r in $(seq 1 "$RUNS"); do
            run "$REPO_ROOT/target/release/index-lookup" --keys=200000 --per_block="$per_block" \
                | tee "$OUT/p1-per${per_block}-run$r.txt"
        done
    done
fi

flags_for() {
    case $1 in
        binary) echo "--engine=splitkv --index_kind=binary" ;;
        learned) echo "--engine=splitkv --index_kind=learned" ;;
        *) engine_flags "$1" ;;
    esac
}

if [[ " $PARTS " == *" 2 "* ]]; then
    for r in $(seq 1 "$RUNS"); do
        for value in 100 1024; do
            for cache in default 1048576; do
                cache_flag=()
                [[ $cache == default ]] || cache_flag=(--cache_size="$cache")
                for engine in binary learned leveldb rocksdb; do
                    name="p2-v$value-cache$cache-$engine-run$r"
                    # shellcheck disable=SC2046 # flags_for prints flags meant to split into words
                    run "$BENCH_BIN" $(flags_for "$engine") --db="$DB_DIR/$engine" --num="$NUM" \
                        --reads="$READS" --value_size="$value" --compression_type=none --compression_ratio=1 \
                        --benchmarks=fillrandom,compact,readrandom "${cache_flag[@]}" --json="$OUT/$name.json" \
                        | tee "$OUT/$name.txt"
                    run rm -rf "${DB_DIR:?}/$engine"
                done
            done
        done
    done
fi
