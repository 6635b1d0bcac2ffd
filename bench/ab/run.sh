#!/usr/bin/env bash
# Paired A/B of two revisions of splitkv on the README's main job: builds `splitkv-bench` at
# BASE and at HEAD (or NEW), then runs ROUNDS interleaved rounds (the order of the two builds
# alternates from round to round, so drift on a shared machine hits both alike) of
# fillrandom,readrandom,readseq at 1 KiB and at 100 B values, 1M keys, default options.
# Prints, per benchmark and value size, each build's median and the ratio NEW/BASE of the
# medians in throughput terms (>1: NEW is faster).
#
# usage: bench/ab/run.sh BASE [NEW]     (env: ROUNDS=5, NUM=1000000, OUT=dir for raw output)
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

BASE=${1:?usage: bench/ab/run.sh BASE [NEW]}
NEW=${2:-HEAD}
ROUNDS=${ROUNDS:-5}
NUM=${NUM:-1000000}
OUT=${OUT:-$(mktemp -d)}
WORK=$(mktemp -d)
trap 'git -C "$REPO_ROOT" worktree remove --force "$WORK/base" >/dev/null 2>&1 || true; git -C "$REPO_ROOT" worktree remove --force "$WORK/new" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

for side in base new; do
    rev=$BASE
    [[ $side == new ]] && rev=$NEW
    run git -C "$REPO_ROOT" worktree add --detach "$WORK/$side" "$rev" >/dev/null
    (cd "$WORK/$side" && run env CARGO_TARGET_DIR="$WORK/target-$side" cargo build --release -q -p splitkv-bench)
done

mkdir -p "$OUT"
for round in $(seq 1 "$ROUNDS"); do
    order=(base new)
    ((round % 2 == 0)) && order=(new base)
    for size in 1024 100; do
        for side in "${order[@]}"; do
            run "$WORK/target-$side/release/splitkv-bench" --num="$NUM" --value_size="$size" \
                --benchmarks=fillrandom,readrandom,readseq --db="$WORK/db" \
                >"$OUT/$side-$size-round$round.txt"
        done
    done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/summarize.py" "$OUT"
