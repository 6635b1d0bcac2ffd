#!/usr/bin/env bash
# Reproduces docs/results/multiget.md: batched point reads (`multireadrandom --batch_size=N`) for
# splitkv (`Db::multi_get`), RocksDB (the batched `MultiGet`) and LevelDB (no MultiGet: a loop of
# gets), against a loop of gets (`readrandom`) on the same keys, page cache cold and warm.
#
# Usage (from anywhere): bench/multiget/run.sh [OUT_DIR]
# Environment: RUNS (3 rounds cold), WARM_RUNS (1 round warm), NUM (1000000), VALUE_SIZE (1024),
#   COLD_READS (20000 keys per cold benchmark), WARM_READS (200000), BATCHES ("1 8 32 128"),
#   ENGINES ("splitkv rocksdb leveldb"), DB (/tmp/splitkv-multiget-db; one per engine),
#   BENCH_WRAPPER (a command prefix for every bench process, e.g. `flock LOCKFILE` on a machine
#   where other benchmarks must not overlap these).
# Each process runs one benchmark three times (`--benchmarks=B,B,B`): benchmark k of a process
# draws its keys from seed SEED + k - 1 whatever the engine or batch size, so every cell reads
# the same keys. SEED (2000) differs from the load's seed (1000): reads with the load's seed
# would visit keys in the order they were written, i.e. values in log order.
# "cold" runs pass --drop_os_cache=true: before each benchmark the database is closed, evicted
# from the page cache (fdatasync + POSIX_FADV_DONTNEED) and reopened. "warm" runs read the whole
# database once (readseq) first.
# Every result is a line of OUT_DIR/results.tsv: engine cache benchmark batch micros/op, and
# OUT_DIR/raw.txt holds every command and its full output;
# bench/multiget/summarize.py OUT_DIR/results.tsv prints the tables of multiget.md.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

OUT=${1:-$REPO_ROOT/bench/multiget/out}
RUNS=${RUNS:-3}
WARM_RUNS=${WARM_RUNS:-1}
NUM=${NUM:-1000000}
VALUE_SIZE=${VALUE_SIZE:-1024}
COLD_READS=${COLD_READS:-20000}
WARM_READS=${WARM_READS:-200000}
BATCHES=${BATCHES:-"1 8 32 128"}
ENGINES=${ENGINES:-"splitkv rocksdb leveldb"}
DB=${DB:-/tmp/splitkv-multiget-db}
SEED=${SEED:-2000}
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
RAW="$OUT/raw.txt"

install_packages
build_bench

# measure ENGINE CACHE BATCH -- bench flags...: runs the bench, keeps its output in raw.txt and
# appends one results line per multireadrandom/readrandom line.
measure() {
    local engine=$1 cache=$2 batch=$3
    shift 4
    { printf '+ %s\n' "$*"; ${BENCH_WRAPPER:-} "$@" 2>/dev/null; } | tee -a "$RAW" |
        awk -v prefix="$engine	$cache" -v batch="$batch" \
            '($1 == "multireadrandom" || $1 == "readrandom") && $2 == ":" { print prefix "\t" $1 "\t" batch "\t" $3 }' |
        tee -a "$RESULTS"
}

common="--num=$NUM --value_size=$VALUE_SIZE --compression_ratio=1"
for engine in $ENGINES; do
    rm -rf "$DB-$engine"
    run ${BENCH_WRAPPER:-} "$BENCH_BIN" --engine="$engine" $common --db="$DB-$engine" --benchmarks=fillrandom >>"$RAW" 2>/dev/null
done

# one_round CACHE READS: every engine, a loop of gets and each batch size.
one_round() {
    local cache=$1 reads=$2 cold=false warmup=""
    [[ $cache == cold ]] && cold=true
    [[ $cache == warm ]] && warmup="readseq,"
    for engine in $ENGINES; do
        local flags="--engine=$engine $common --db=$DB-$engine --use_existing_db=1 --seed=$SEED --reads=$reads --drop_os_cache=$cold"
        measure "$engine" "$cache" loop -- "$BENCH_BIN" $flags --benchmarks=${warmup}readrandom,readrandom,readrandom
        for batch in $BATCHES; do
            measure "$engine" "$cache" "$batch" -- "$BENCH_BIN" $flags --batch_size="$batch" \
                --benchmarks=${warmup}multireadrandom,multireadrandom,multireadrandom
        done
    done
}

for round in $(seq 1 "$RUNS"); do
    one_round cold "$COLD_READS"
    echo "cold round $round done" >&2
done
for round in $(seq 1 "$WARM_RUNS"); do
    one_round warm "$WARM_READS"
    echo "warm round $round done" >&2
done
for engine in $ENGINES; do rm -rf "$DB-$engine"; done
