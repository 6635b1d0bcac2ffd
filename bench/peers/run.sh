#!/usr/bin/env bash
# Checks that the LevelDB and RocksDB rows of splitkv-bench match those engines' own db_bench on
# the same options (docs/results/baseline.md, "Peers through our harness vs their own db_bench").
#
# Builds splitkv-bench with the peers (system libraries; the header line printed by every run
# names each peer's library file), LevelDB 1.23's db_bench against the system LevelDB
# (build_leveldb_db_bench.sh; the source is cloned at tag 1.23 unless LEVELDB_SRC names a
# checkout), and uses RocksDB's db_bench from Debian's rocksdb-tools, which links the same
# librocksdb the harness does. Then ROUNDS interleaved rounds (the order of the four runs
# reverses every other round) of fillseq,fillrandom,overwrite,readrandom,readseq at NUM keys for
# each value size in SIZES. Every run gets the options the harness gives that peer:
#   common        --num --value_size --compression_ratio=1 --cache_size=8388608 (8 MiB LRU)
#   harness       --compression_type=none (everything else: the engine's own defaults)
#   LevelDB tool  --compression=0 (its other defaults are LevelDB's Options defaults)
#   RocksDB tool  --compression_type=none, --statistics=1 (the harness always enables
#                 statistics), and the db_bench defaults that differ from the RocksDB defaults the
#                 harness keeps, set back to those: --enable_pipelined_write=false
#                 --table_cache_numshardbits=6 --cache_high_pri_pool_ratio=0.5
#                 --delayed_write_rate=16777216 --hard_pending_compaction_bytes_limit=274877906944
#                 --index_shortening_mode=1 --pin_top_level_index_and_filter=true. The OPTIONS
#                 files both runs leave then differ only where nothing here depends on them
#                 (FIFO compaction settings, malloc stats in the LOG, an error-handler listener).
#                 Both run with RocksDB's perf counters off (db_bench's --perf_level=1 default).
# Raw output (paths shown as TMP) and commands.txt go to OUT (default: a new temporary directory); summarize.py prints the medians
# and the harness/db_bench ratios.
#
# usage: bench/peers/run.sh [OUT]   (env: ROUNDS=3, NUM=1000000, SIZES="100 1024", LEVELDB_SRC)
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

OUT=${1:-$(mktemp -d)}
ROUNDS=${ROUNDS:-3}
NUM=${NUM:-1000000}
SIZES=${SIZES:-"100 1024"}
BENCHMARKS=fillseq,fillrandom,overwrite,readrandom,readseq
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

install_packages
if ! command -v db_bench >/dev/null 2>&1; then
    sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y rocksdb-tools g++
fi
build_bench

LEVELDB_DB_BENCH=$WORK/leveldb_db_bench
if [[ -z ${LEVELDB_SRC:-} ]]; then
    LEVELDB_SRC=$WORK/leveldb
    run git clone --quiet --depth 1 --branch 1.23 https://github.com/google/leveldb "$LEVELDB_SRC"
fi
run "$(dirname "${BASH_SOURCE[0]}")/build_leveldb_db_bench.sh" "$LEVELDB_SRC" "$LEVELDB_DB_BENCH"

# The command line of one configuration at value size $2.
command_for() {
    local common="--num=$NUM --value_size=$2 --compression_ratio=1 --cache_size=8388608 --benchmarks=$BENCHMARKS --db=$WORK/db"
    case $1 in
        leveldb-harness) echo "$BENCH_BIN --engine=leveldb $common --compression_type=none" ;;
        leveldb-dbbench) echo "$LEVELDB_DB_BENCH $common --compression=0" ;;
        rocksdb-harness) echo "$BENCH_BIN --engine=rocksdb $common --compression_type=none" ;;
        rocksdb-dbbench) echo "db_bench $common --compression_type=none --statistics=1 --enable_pipelined_write=false --table_cache_numshardbits=6 --cache_high_pri_pool_ratio=0.5 --delayed_write_rate=16777216 --hard_pending_compaction_bytes_limit=274877906944 --index_shortening_mode=1 --pin_top_level_index_and_filter=true" ;;
    esac
}

# Paths of this machine become TMP in everything written to OUT.
sanitize() {
    sed -e "s#$WORK#TMP#g" -e "s#$REPO_ROOT#REPO#g" -e "s#${CARGO_TARGET_DIR:-$REPO_ROOT/target}#REPO/target#g"
}

: >"$OUT/commands.txt"
for round in $(seq 1 "$ROUNDS"); do
    order=(leveldb-harness leveldb-dbbench rocksdb-harness rocksdb-dbbench)
    ((round % 2 == 0)) && order=(rocksdb-dbbench rocksdb-harness leveldb-dbbench leveldb-harness)
    for size in $SIZES; do
        for config in "${order[@]}"; do
            rm -rf "$WORK/db"
            cmd=$(command_for "$config" "$size")
            echo "round $round: $cmd" | sanitize | tee -a "$OUT/commands.txt" >&2
            # db_bench's progress lines end in carriage returns; drop them, keep the header.
            $cmd 2>&1 | tr '\r' '\n' | grep -v '^\.\.\. finished' | sanitize >"$OUT/$config-$size-round$round.txt"
            # The options RocksDB really used, as it recorded them, to compare the two runs.
            if [[ $config == rocksdb-* && $round == 1 ]]; then
                sanitize <"$(ls "$WORK"/db/OPTIONS-* | sort | tail -1)" >"$OUT/$config-$size-OPTIONS.ini"
            fi
        done
    done
done
rm -rf "$WORK/db"
for size in $SIZES; do
    diff <(grep -v '^ *#' "$OUT/rocksdb-harness-$size-OPTIONS.ini" | sort) \
        <(grep -v '^ *#' "$OUT/rocksdb-dbbench-$size-OPTIONS.ini" | sort) >"$OUT/rocksdb-$size-OPTIONS.diff" || true
done
python3 "$(dirname "${BASH_SOURCE[0]}")/summarize.py" "$OUT" | tee "$OUT/summary.md"
