#!/usr/bin/env bash
# Reproduces docs/results/partitions.md: the read-after-delete experiment (TridentKV). Load NUM
# keys, delete DELETE_PERCENT of them in DELETE_RANGES range deletes (the first half of each of
# that many equal slices of the key space), and measure point reads (readrandom), seeks
# (seekrandom: an iterator per seek) and iterator creation (newiterator) before and after, then
# the space the delete frees and the time it takes to free it, for:
#   splitkv-partitioned  --partitions=2*DELETE_RANGES: each range delete covers one partition
#                        whole, whose tables are dropped by one MANIFEST edit;
#   splitkv-tombstones   no partitions: every delete is a range tombstone, applied by compaction;
#   rocksdb              RocksDB's DeleteRange (range tombstones in its SSTables).
# Reclaiming is a full compaction (which applies range tombstones), and for splitkv then a
# value-log GC run (which frees the log records the delete made garbage).
#
# Usage (from anywhere): bench/partitions/run.sh [OUT_DIR]
# Environment: RUNS (3), NUM (1000000), VALUE_SIZE (100), READS (200000 per read benchmark),
#   DELETE_RANGES (100), DELETE_PERCENT (50),
#   ENGINES ("splitkv-partitioned splitkv-tombstones rocksdb"), DB (/tmp/splitkv-partitions-db),
#   BENCH_WRAPPER (a command prefix for every bench process, e.g. `flock LOCKFILE`).
# Every result is a line of OUT_DIR/results.tsv: run engine phase benchmark value unit, and
# OUT_DIR/raw.txt holds every command and its full output;
# bench/partitions/summarize.py OUT_DIR/results.tsv prints the tables of partitions.md.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

OUT=${1:-$REPO_ROOT/bench/partitions/out}
RUNS=${RUNS:-3}
NUM=${NUM:-1000000}
VALUE_SIZE=${VALUE_SIZE:-100}
READS=${READS:-200000}
DELETE_RANGES=${DELETE_RANGES:-100}
DELETE_PERCENT=${DELETE_PERCENT:-50}
ENGINES=${ENGINES:-"splitkv-partitioned splitkv-tombstones rocksdb"}
DB=${DB:-/tmp/splitkv-partitions-db}
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
RAW="$OUT/raw.txt"

install_packages
build_bench

flags_for() {
    case $1 in
        splitkv-partitioned) echo "--engine=splitkv --partitions=$((2 * DELETE_RANGES))" ;;
        splitkv-tombstones) echo "--engine=splitkv" ;;
        rocksdb) echo "--engine=rocksdb" ;;
        *) echo "unknown engine $1" >&2; return 1 ;;
    esac
}

# bench RUN ENGINE PHASE -- flags...: runs the bench, keeps its output in raw.txt and appends one
# results line per benchmark line (micros/op).
bench() {
    local round=$1 engine=$2 phase=$3
    shift 4
    { printf '+ %s\n' "$*"; ${BENCH_WRAPPER:-} "$@" 2>/dev/null; } | tee -a "$RAW" |
        awk -v prefix="$round	$engine	$phase" '$2 == ":" && $4 == "micros/op;" { print prefix "\t" $1 "\t" $3 "\tmicros/op" }' |
        tee -a "$RESULTS"
}

# size RUN ENGINE PHASE: the database directory's allocated bytes.
size() {
    local bytes
    bytes=$(du -sB1 "$DB" | cut -f1)
    printf '%s\t%s\t%s\tdisk\t%s\tbytes\n' "$1" "$2" "$3" "$bytes" | tee -a "$RESULTS"
    printf '+ du -sB1 DB -> %s\n' "$bytes" >>"$RAW"
}

# timed RUN ENGINE PHASE -- command...: wall seconds of a whole bench process.
timed() {
    local round=$1 engine=$2 phase=$3
    shift 4
    local start end
    start=$(date +%s.%N)
    { printf '+ %s\n' "$*"; ${BENCH_WRAPPER:-} "$@" 2>/dev/null; } >>"$RAW"
    end=$(date +%s.%N)
    awk -v r="$round" -v e="$engine" -v p="$phase" -v s="$start" -v t="$end" \
        'BEGIN { printf "%s\t%s\t%s\treclaim\t%.3f\tseconds\n", r, e, p, t - s }' | tee -a "$RESULTS"
}

common="--num=$NUM --value_size=$VALUE_SIZE --compression_ratio=1 --db=$DB"
reads="readrandom,seekrandom,newiterator"
for round in $(seq 1 "$RUNS"); do
    for engine in $ENGINES; do
        f=$(flags_for "$engine")
        rm -rf "$DB"
        bench "$round" "$engine" load -- "$BENCH_BIN" $f $common --benchmarks=fillrandom
        bench "$round" "$engine" settle -- "$BENCH_BIN" $f $common --use_existing_db=true --benchmarks=compact
        size "$round" "$engine" before
        bench "$round" "$engine" before -- "$BENCH_BIN" $f $common --use_existing_db=true --benchmarks=$reads \
            --reads="$READS"
        bench "$round" "$engine" delete -- "$BENCH_BIN" $f $common --use_existing_db=true --benchmarks=deleterange \
            --delete_ranges="$DELETE_RANGES" --delete_percent="$DELETE_PERCENT"
        size "$round" "$engine" deleted
        bench "$round" "$engine" after -- "$BENCH_BIN" $f $common --use_existing_db=true --benchmarks=$reads \
            --reads="$READS"
        case $engine in
            splitkv*) timed "$round" "$engine" reclaim -- "$BENCH_BIN" $f $common --use_existing_db=true --benchmarks=compact,gc ;;
            *) timed "$round" "$engine" reclaim -- "$BENCH_BIN" $f $common --use_existing_db=true --benchmarks=compact ;;
        esac
        size "$round" "$engine" reclaimed
        bench "$round" "$engine" reclaimed -- "$BENCH_BIN" $f $common --use_existing_db=true --benchmarks=$reads \
            --reads="$READS"
    done
done
rm -rf "$DB"
