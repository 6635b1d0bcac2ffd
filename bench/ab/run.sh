#!/usr/bin/env bash
# Paired A/B of two revisions of splitkv on the README's main job: builds `splitkv-bench` at
# BASE and at HEAD (or NEW), then runs ROUNDS interleaved rounds (the order of the two builds
# alternates from round to round, so drift on a shared machine hits both alike) of
# fillrandom,readrandom,readseq at 1 KiB and at 100 B values, 1M keys, default options.
# Prints, per benchmark and value size, each build's median and the ratio NEW/BASE of the
# medians in throughput terms (>1: NEW is faster).
#
# MODE=capped_scan instead A/Bs the scan of docs/results/scale.md: NEW's build loads 2M x 1 KiB
# at random and rewrites the log in key order (rewritelog) under a 512 MiB memory cap; then each
# round runs readseq twice over that whole database with each build, under the same cap, with
# the page cache dropped before each run (needs root). MODE=capped_sequence runs, per build and
# round, the issue's sequence on a fresh database under the same cap: fillrandom, rewritelog, then
# two readseq of 200k entries.
#
# MODE=threads A/Bs concurrent writers: per round, `fillrandom` with one thread (NUM keys) and
# with two (NUM/2 keys each, db_bench's convention), at 1 KiB and 100 B, default options, and at
# 1 KiB again with no value-log space limit (--space_amplification=none), which takes GC's
# stalls out and leaves the write path. Compares total ops/s, and each build's two threads
# against its one, round by round. VARIANTS picks some of them (e.g. VARIANTS="1024-t1none").
#
# MODE=overwrite A/Bs value-log GC under the default space limit: per round and build,
# fillrandom then overwrite at 1 KiB (GC rewrites about twice what the overwrite writes).
#
# MODE=per_op A/Bs the per-operation comparison's sequence (bench/per_op/run.sh) on splitkv
# alone: fillseq,fillrandom,overwrite,readrandom,readseq at 100 B and 1 KiB, incompressible.
#
# Every run starts with the page cache dropped, where that is allowed (root; see
# `drop_page_cache` in common.sh), so that both builds' binaries are read afresh.
#
# usage: bench/ab/run.sh BASE [NEW]     (env: ROUNDS=5, NUM=1000000, OUT=dir for raw output,
#                                        MODE=main|capped_scan|capped_sequence|threads|overwrite|per_op)
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

BASE=${1:?usage: bench/ab/run.sh BASE [NEW]}
NEW=${2:-HEAD}
ROUNDS=${ROUNDS:-5}
NUM=${NUM:-1000000}
OUT=${OUT:-$(mktemp -d)}
# The summary reads every round file in OUT: an earlier A/B's files would be counted with ours.
if [[ -d $OUT ]] && [[ -n $(ls -A "$OUT") ]]; then
    echo "OUT=$OUT is not empty: give a new directory" >&2
    exit 2
fi
WORK=$(mktemp -d)
trap 'git -C "$REPO_ROOT" worktree remove --force "$WORK/base" >/dev/null 2>&1 || true; git -C "$REPO_ROOT" worktree remove --force "$WORK/new" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

for side in base new; do
    rev=$BASE
    [[ $side == new ]] && rev=$NEW
    run git -C "$REPO_ROOT" worktree add --detach "$WORK/$side" "$rev" >/dev/null
    (cd "$WORK/$side" && run env CARGO_TARGET_DIR="$WORK/target-$side" cargo build --release -q -p splitkv-bench)
done

mkdir -p "$OUT"
extra=()
capped=(--num=2000000 --value_size=1024 --compression_ratio=1 --memory_limit=512MiB --db="$WORK/db")
case ${MODE:-main} in
    capped_scan)
        run "$WORK/target-new/release/splitkv-bench" "${capped[@]}" --benchmarks=fillrandom,rewritelog \
            >"$OUT/load.txt"
        scan=(--use_existing_db=1 --benchmarks=readseq,readseq)
        ;;
    capped_sequence) scan=(--reads=200000 --benchmarks=fillrandom,rewritelog,readseq,readseq) ;;
    main) sizes=(1024 100) benchmarks=fillrandom,readrandom,readseq ;;
    overwrite) sizes=(1024) benchmarks=fillrandom,overwrite,stats ;;
    per_op) sizes=(100 1024) benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq extra=(--compression_ratio=1) ;;
    threads) ;;
    *) echo "unknown MODE=$MODE (main, capped_scan, capped_sequence, threads, overwrite or per_op)" >&2; exit 2 ;;
esac
if [[ ${MODE:-main} == threads ]]; then
    for round in $(seq 1 "$ROUNDS"); do
        order=(base new)
        ((round % 2 == 0)) && order=(new base)
        for variant in ${VARIANTS:-1024-t1 1024-t2 100-t1 100-t2 1024-t1none 1024-t2none}; do
            size=${variant%%-*}
            threads=${variant#*-t}
            threads=${threads%none}
            limit=()
            [[ $variant == *none ]] && limit=(--space_amplification=none)
            for side in "${order[@]}"; do
                drop_page_cache
                run "$WORK/target-$side/release/splitkv-bench" --num=$((NUM / threads)) --threads="$threads" \
                    --value_size="$size" "${limit[@]}" --benchmarks=fillrandom --db="$WORK/db" \
                    >"$OUT/$side-$variant-round$round.txt"
            done
        done
    done
    python3 "$(dirname "${BASH_SOURCE[0]}")/summarize.py" "$OUT"
    exit
fi
if [[ ${MODE:-main} == capped_* ]]; then
    for round in $(seq 1 "$ROUNDS"); do
        order=(base new)
        ((round % 2 == 0)) && order=(new base)
        for side in "${order[@]}"; do
            [[ $MODE == capped_sequence ]] && rm -rf "$WORK/db"
            drop_page_cache
            run "$WORK/target-$side/release/splitkv-bench" "${capped[@]}" "${scan[@]}" \
                >"$OUT/$side-1024-round$round.txt"
        done
    done
    python3 "$(dirname "${BASH_SOURCE[0]}")/summarize.py" "$OUT"
    exit
fi
for round in $(seq 1 "$ROUNDS"); do
    order=(base new)
    ((round % 2 == 0)) && order=(new base)
    for size in "${sizes[@]}"; do
        for side in "${order[@]}"; do
            drop_page_cache
            run "$WORK/target-$side/release/splitkv-bench" --num="$NUM" --value_size="$size" \
                --benchmarks="$benchmarks" "${extra[@]}" --db="$WORK/db" \
                >"$OUT/$side-$size-round$round.txt"
        done
    done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/summarize.py" "$OUT"
