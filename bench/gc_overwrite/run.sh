#!/usr/bin/env bash
# Sustained overwrites with default options (docs/results/gc.md, "5x overwrite"): fillrandom of
# NUM x 1 KiB, then five overwrites of NUM random keys each, background GC with every option at
# its default. The engine is sampled every 100 ms (bytes on disk, write amplification); plot.py
# turns the samples into space and write amplification over time.
# Env: NUM (default 200000), RUNS (default 3), OUT (default target/bench/gc_overwrite),
# BENCH_BIN (an already built splitkv-bench), DB_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
NUM="${NUM:-200000}"
RUNS="${RUNS:-3}"
OUT="${OUT:-target/bench/gc_overwrite}"
DB="${DB_DIR:-/tmp/splitkv-gc-overwrite}"
B="${BENCH_BIN:-target/release/splitkv-bench}"
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p splitkv-bench
mkdir -p "$OUT"
for run in $(seq 1 "$RUNS"); do
    rm -rf "$DB"
    cmd=("$B" --db="$DB" --num="$NUM" --value_size=1024 --compression_ratio=1
         --benchmarks=fillrandom,overwrite,overwrite,overwrite,overwrite,overwrite --stats=true
         --json="$OUT/run$run.json" --stats_dump="$OUT/run$run.jsonl")
    echo "+ ${cmd[*]}" | tee -a "$OUT/commands.txt"
    "${cmd[@]}" > "$OUT/run$run.txt" 2>&1
    grep -E "^[a-z]+ +:|space amp" "$OUT/run$run.txt" | sed 's/latency.*write amp/write amp/'
done
rm -rf "$DB"
python3 "$(dirname "$0")/plot.py" "$OUT"/run*.json
echo "outputs in $OUT"
