#!/usr/bin/env bash
# Reproduces docs/results/scale.md: every engine with its memory capped below the data's size.
#
# Usage (from anywhere): bench/scale/run.sh [capped|scale|all] [OUT_DIR]
#   capped  2M x 1 KiB (2 GB) with each engine's process in a 512 MiB memory cgroup, page cache
#           included (--memory_limit): fillrandom, readrandom (--reads=200000) and readseq, then
#           a second readseq; splitkv rewrites its value log in key order (rewritelog) before
#           its second scan. The regime of issue "larger than memory" (a few minutes per engine;
#           LevelDB's lookups are the longest part). Prints a summary with splitkv's ratios.
#   scale   1M, 4M and 16M keys at 1 KiB, uncapped and capped at a quarter of the data
#           (16M x 1 KiB writes 17 GB per engine: an hour or more on a small machine).
# Environment: ENGINES ("splitkv leveldb rocksdb"), DB (/tmp/splitkv-scale-db),
#   MEMORY_LIMIT (512MiB), NUM (2000000), READS (200000), NUMS ("1000000 4000000 16000000").
# Needs root: --memory_limit creates a cgroup-v1 memory group and moves the bench into it.
# Each run's whole output (stdout and stderr) goes to OUT_DIR/<experiment>-<engine>[-<num>-<cap>].txt,
# its first line the command (with the database directory written as $DB).
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

WHAT=${1:-capped}
OUT=${2:-$REPO_ROOT/bench/scale/out}
ENGINES=${ENGINES:-"splitkv leveldb rocksdb"}
DB=${DB:-/tmp/splitkv-scale-db}
MEMORY_LIMIT=${MEMORY_LIMIT:-512MiB}
NUM=${NUM:-2000000}
READS=${READS:-200000}
NUMS=${NUMS:-"1000000 4000000 16000000"}
mkdir -p "$OUT"

install_packages
build_bench

# Runs the bench once into FILE, the command (database path as $DB) on its first line.
# measure FILE -- bench flags...
measure() {
    local file=$1
    shift 2
    local shown="splitkv-bench $* --db=\$DB"
    printf '$ %s\n' "$shown" | tee "$file" >&2
    rm -rf "$DB"
    "$BENCH_BIN" "$@" --db="$DB" >>"$file" 2>&1
    rm -rf "$DB"
    grep -E '^(memory limit|[a-z0-9_]+ +:|  resources)' "$file" >&2 || true
}

capped() {
    for engine in $ENGINES; do
        local second_scan=readseq
        [[ $engine == splitkv ]] && second_scan=rewritelog,readseq
        measure "$OUT/capped-$engine.txt" -- --engine="$engine" --num="$NUM" --value_size=1024 \
            --compression_ratio=1 --benchmarks=fillrandom,readrandom,readseq,$second_scan,stats --reads="$READS" \
            --memory_limit="$MEMORY_LIMIT"
    done
    python3 "$(dirname "${BASH_SOURCE[0]}")/summarize.py" capped "$OUT"
}

scale() {
    for num in $NUMS; do
        # A quarter of the data, rounded down to a MiB.
        local quarter=$(((num * 1040 / 4) >> 20))MiB
        for engine in $ENGINES; do
            for cap in none "$quarter"; do
                local limit=()
                [[ $cap != none ]] && limit=(--memory_limit="$cap")
                measure "$OUT/scale-$engine-$num-$cap.txt" -- --engine="$engine" --num="$num" --value_size=1024 \
                    --compression_ratio=1 --benchmarks=fillrandom,readrandom,readseq --reads="$READS" "${limit[@]}"
            done
        done
    done
    python3 "$(dirname "${BASH_SOURCE[0]}")/summarize.py" scale "$OUT"
}

case $WHAT in
    capped) capped ;;
    scale) scale ;;
    all) capped; scale ;;
    *) echo "usage: $0 [capped|scale|all] [OUT_DIR]" >&2; exit 2 ;;
esac
