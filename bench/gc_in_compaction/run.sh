#!/usr/bin/env bash
# Relocation through compaction against GC alone (docs/design.md, "Relocation through
# compaction"): ROUNDS interleaved rounds (the order alternates from round to round) of
# fillrandom then overwrite, NUM x 1 KiB, default options, with --gc_in_compaction=false and
# =true on one build. Prints each setting's medians and the per-round ratios (>1: moves faster).
# Env: ROUNDS (3), NUM (1000000), OUT (raw output; a temporary directory by default),
# BENCH_BIN (an already built splitkv-bench), DB_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${ROUNDS:-3}"
NUM="${NUM:-1000000}"
OUT="${OUT:-$(mktemp -d)}"
DB="${DB_DIR:-$(mktemp -d)/db}"
B="${BENCH_BIN:-target/release/splitkv-bench}"
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p splitkv-bench
mkdir -p "$OUT"
for round in $(seq 1 "$ROUNDS"); do
    order=(false true)
    ((round % 2 == 0)) && order=(true false)
    for moves in "${order[@]}"; do
        cmd=("$B" --db="$DB" --num="$NUM" --value_size=1024 --benchmarks=fillrandom,overwrite,stats
             --gc_in_compaction="$moves")
        echo "+ ${cmd[*]}" >&2
        "${cmd[@]}" >"$OUT/moves-$moves-round$round.txt" 2>&1
    done
done
rm -rf "$DB"
python3 "$(dirname "$0")/summarize.py" "$OUT"
echo "raw output in $OUT" >&2
