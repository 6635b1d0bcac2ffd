#!/usr/bin/env bash
# Reproduces the Slot (time-slice compaction scheduling) experiments of docs/results/slot.md.
# Usage: bench/slot/run.sh [OUT_DIR]   (from the repository root; about 8 minutes on 2 cores)
# Every configuration runs 3 times; run 1 also writes a --stats_dump JSON-lines file.
set -euo pipefail
OUT=${1:-bench/slot/out}
RUNS=${RUNS:-3}
DB=${DB:-/tmp/splitkv-slot-db}
mkdir -p "$OUT"
cargo build --release -q -p splitkv-bench
BENCH=target/release/splitkv-bench
# 1M random keys x 100 B, 1 MiB memtables, 4 MiB L1, 1 MiB tables: six levels form in seconds.
COMMON="--benchmarks=fillrandom --num=1000000 --value_size=100 --write_buffer_size=1048576 \
--max_bytes_for_level_base=4194304 --target_file_size=1048576 --db=$DB --stats=true"

run() { # name, extra flags...
  local name=$1; shift
  for r in $(seq 1 "$RUNS"); do
    local dump=""
    [ "$r" = 1 ] && dump="--stats_dump=$OUT/$name.jsonl"
    $BENCH $COMMON "$@" $dump > "$OUT/$name.run$r.txt" 2>/dev/null
    echo "$name run $r: $(grep -o 'fillrandom *: *[0-9.]* micros/op' "$OUT/$name.run$r.txt")"
  done
}

# Inline values (no separation): the thesis' setting.
run inline-score          --value_threshold=max --compaction_policy=score
run inline-ts1000         --value_threshold=max --compaction_policy=timeslice --time_slice_ms=1000
for s in 50 200 4000 16000; do
  run inline-ts$s         --value_threshold=max --compaction_policy=timeslice --time_slice_ms=$s
done
run inline-dyn            --value_threshold=max --compaction_policy=timeslice --time_slice_ms=1000 --dynamic_slice
run inline-drain70        --value_threshold=max --compaction_policy=timeslice --time_slice_ms=1000 --slice_drain_percent=70
run inline-dyn-drain70    --value_threshold=max --compaction_policy=timeslice --time_slice_ms=1000 --dynamic_slice --slice_drain_percent=70
run inline-score-w2       --value_threshold=max --compaction_policy=score --max_background_compactions=2
run inline-ts1000-w2      --value_threshold=max --compaction_policy=timeslice --time_slice_ms=1000 --max_background_compactions=2
# Key-value separation on: every value goes to the value log, the LSM-tree holds pointers.
run sep-score             --value_threshold=0 --compaction_policy=score
run sep-ts1000            --value_threshold=0 --compaction_policy=timeslice --time_slice_ms=1000
rm -rf "$DB"
