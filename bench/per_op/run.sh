#!/usr/bin/env bash
# The per-operation comparison: db_bench's fillseq, fillrandom, overwrite, readrandom and readseq
# at 100-byte and 1 KiB values, 1M keys (16-byte keys, incompressible values), one thread, each
# engine with its default options; then fillrandom at 1 KiB with two writer threads, twice: as
# db_bench runs it (--num=NUM/2: each thread writes NUM/2 keys drawn from NUM/2, so the total
# matches the one-thread run but overwrites twice as often), and over the one-thread run's key
# space (--num=NUM --writes=NUM/2: the same work as one thread, split over two); then, at 1 KiB, a scan
# after a random load: fillrandom,readseq,readseq, where splitkv first rewrites its value log in
# key order (fillrandom,rewritelog,readseq,readseq; the last scan is compared, warm for every
# engine). The page cache is dropped before every run where that is allowed (root), so that
# every engine's code is read afresh (see `drop_page_cache`). Rounds are interleaved
# (every engine once per round, the engine order rotating), and the summary gives each engine's
# median and splitkv's ratio to every peer computed round by round.
#
# Environment:
#   ROUNDS    interleaved rounds (default 2)
#   NUM       keys per run (default 1000000)
#   ENGINES   engines to run (default "splitkv leveldb rocksdb fjall")
#   FEATURES  cargo features of the bench build (default "leveldb,rocksdb,fjall")
#   OUT       directory for the raw output (default target/bench/per_op)
#   DB_DIR    where databases are made (default a temporary directory)
source "$(dirname "$0")/../common.sh"

ROUNDS=${ROUNDS:-2}
NUM=${NUM:-1000000}
ENGINES=${ENGINES:-"splitkv leveldb rocksdb fjall"}
FEATURES=${FEATURES:-leveldb,rocksdb,fjall}
OUT=${OUT:-$REPO_ROOT/target/bench/per_op}
DB_DIR=${DB_DIR:-$(mktemp -d -t splitkv-per-op-XXXXXX)}
BENCHMARKS=fillseq,fillrandom,overwrite,readrandom,readseq

install_packages
(cd "$REPO_ROOT" && run env ROCKSDB_LIB_DIR="$ROCKSDB_LIB_DIR" \
    cargo build --release -p splitkv-bench --features "$FEATURES")
mkdir -p "$OUT"
read -r -a engines <<<"$ENGINES"

for round in $(seq 1 "$ROUNDS"); do
    # Rotate the engine order so that drift on a shared machine does not favour one engine.
    shift_by=$(((round - 1) % ${#engines[@]}))
    order=("${engines[@]:shift_by}" "${engines[@]:0:shift_by}")
    for engine in "${order[@]}"; do
        for size in 100 1024; do
            rm -rf "$DB_DIR/db"
            drop_page_cache
            run "$BENCH_BIN" --engine="$engine" --num="$NUM" --value_size="$size" --compression_ratio=1 \
                --benchmarks="$BENCHMARKS" --db="$DB_DIR/db" >"$OUT/$engine-$size-t1-round$round.txt"
        done
        rm -rf "$DB_DIR/db"
        drop_page_cache
        run "$BENCH_BIN" --engine="$engine" --num=$((NUM / 2)) --threads=2 --value_size=1024 \
            --compression_ratio=1 --benchmarks=fillrandom --db="$DB_DIR/db" \
            >"$OUT/$engine-1024-t2-round$round.txt"
        rm -rf "$DB_DIR/db"
        drop_page_cache
        run "$BENCH_BIN" --engine="$engine" --num="$NUM" --writes=$((NUM / 2)) --threads=2 --value_size=1024 \
            --compression_ratio=1 --benchmarks=fillrandom --db="$DB_DIR/db" \
            >"$OUT/$engine-1024-t2same-round$round.txt"
        rm -rf "$DB_DIR/db"
        scan=fillrandom,readseq,readseq
        [[ $engine == splitkv ]] && scan=fillrandom,rewritelog,readseq,readseq
        drop_page_cache
        run "$BENCH_BIN" --engine="$engine" --num="$NUM" --value_size=1024 --compression_ratio=1 \
            --benchmarks="$scan" --db="$DB_DIR/db" >"$OUT/$engine-1024-rw-round$round.txt"
    done
done
rm -rf "$DB_DIR"
python3 "$(dirname "$0")/summarize.py" "$OUT"
