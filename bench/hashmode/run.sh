#!/usr/bin/env bash
# SSHKV's comparisons at this machine's scale (docs/results/hashmode.md), one harness, one run:
#   1. random and sequential write and read, 16-byte keys, 4 KiB values, DATA_MB of data
#      (fillrandom,readrandom and fillseq,readseq, each on a fresh database);
#   2. value sizes 64 B .. 64 KiB at SIZES_MB of data each (fillrandom,readrandom);
#   3. GC cost with logical space amplification 1x and 5x: NUM_GC x 4 KiB loaded, then three
#      overwrites under a physical space budget of 1.5x the data, holes punched, background GC.
#   4. request shards: the hash mode with --hash_shards 1 (group commit), 2 and 4, under 1 and 2
#      client threads (--threads), part 1's workloads, ROUNDS rounds (the report takes medians).
# Engines for 1 and 2: splitkv's hash mode, splitkv's LSM mode, LevelDB and RocksDB.
#
# Environment:
#   DATA_MB   MiB of user data in part 1 (default 1024)
#   SIZES_MB  MiB of user data per value size in part 2 (default 256)
#   READS     random reads per readrandom (default 100000)
#   NUM_GC    keys in part 3 (default 65536, 256 MiB)
#   OUT       output directory (default target/bench/hashmode)
#   DB_DIR    where databases are made (default a temporary directory)
#   PARTS     which parts to run (default "1 2 3"; part 4 runs when named)
#   ROUNDS    rounds of part 4 (default 3); FIRST_ROUND (default 1) adds rounds to an OUT
source "$(dirname "$0")/../common.sh"

DATA_MB=${DATA_MB:-1024}
SIZES_MB=${SIZES_MB:-256}
READS=${READS:-100000}
NUM_GC=${NUM_GC:-65536}
OUT=${OUT:-$REPO_ROOT/target/bench/hashmode}
DB_DIR=${DB_DIR:-$(mktemp -d -t splitkv-hashmode-XXXXXX)}
PARTS=${PARTS:-"1 2 3"}
ROUNDS=${ROUNDS:-3}
FIRST_ROUND=${FIRST_ROUND:-1}
ENGINES="hash lsm leveldb rocksdb"
KEY_SIZE=16

install_packages
build_bench
mkdir -p "$OUT"

flags_for() {
    case $1 in
        hash) echo "--engine=splitkv --index=hash" ;;
        lsm) echo "--engine=splitkv" ;;
        *) engine_flags "$1" ;;
    esac
}

keys_for() { # MiB, value size
    awk -v mb="$1" -v v="$2" -v k="$KEY_SIZE" 'BEGIN { print int(mb * 1048576 / (v + k)) }'
}

bench() { # name engine flags...
    local name=$1 engine=$2
    shift 2
    # shellcheck disable=SC2046 # flags_for prints flags meant to split into words
    run "$BENCH_BIN" $(flags_for "$engine") --db="$DB_DIR/$engine" --compression_type=none \
        --compression_ratio=1 --json="$OUT/$name.json" "$@" | tee "$OUT/$name.txt"
    run rm -rf "$DB_DIR/$engine"
}

if [[ " $PARTS " == *" 1 "* ]]; then
    num=$(keys_for "$DATA_MB" 4096)
    for engine in $ENGINES; do
        bench "p1-random-$engine" "$engine" --benchmarks=fillrandom,readrandom --num="$num" \
            --reads="$READS" --value_size=4096
        bench "p1-seq-$engine" "$engine" --benchmarks=fillseq,readseq --num="$num" --value_size=4096
    done
fi

if [[ " $PARTS " == *" 2 "* ]]; then
    for size in 64 256 1024 4096 16384 65536; do
        num=$(keys_for "$SIZES_MB" "$size")
        for engine in $ENGINES; do
            bench "p2-$size-$engine" "$engine" --benchmarks=fillrandom,readrandom --num="$num" \
                --reads="$READS" --value_size="$size"
        done
    done
fi

if [[ " $PARTS " == *" 3 "* ]]; then
    budget=$(awk -v n="$NUM_GC" 'BEGIN { print int(n * 4200 * 1.5) }')
    for factor in 1 5; do
        bench "p3-lsa$factor" hash --benchmarks=fillrandom,overwrite,overwrite,overwrite --num="$NUM_GC" \
            --value_size=4096 --space_budget="$budget" --space_amplification=none --gc_punch_holes=true \
            --gc_logical_space_factor="$factor" --gc_rate_limit=0 --stats=true
    done
fi

if [[ " $PARTS " == *" 4 "* ]]; then
    num=$(keys_for "$DATA_MB" 4096)
    # Rounds outermost, so that a slow spell of the shared machine spreads over every cell.
    for round in $(seq "$FIRST_ROUND" "$ROUNDS"); do
        for threads in 1 2; do
            for shards in 1 2 4; do
                cell="s$shards-t$threads-r$round"
                bench "p4-random-$cell" hash --benchmarks=fillrandom,readrandom --num="$num" \
                    --reads="$READS" --value_size=4096 --hash_shards="$shards" --threads="$threads"
                bench "p4-seq-$cell" hash --benchmarks=fillseq,readseq --num="$num" --value_size=4096 \
                    --hash_shards="$shards" --threads="$threads"
            done
        done
    done
fi

python3 "$(dirname "$0")/summarize.py" "$OUT" >"$OUT/results.md"
cat "$OUT/results.md"
echo "Wrote $OUT/results.md" >&2
