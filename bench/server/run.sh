#!/usr/bin/env bash
# redis-benchmark against splitkv-server and redis-server (appendonly yes, appendfsync everysec)
# on this machine in one run, plus 3-node clusters of each through `redis-benchmark --cluster`.
#
#   bench/server/run.sh [OUT_DIR]
#
# Every redis-benchmark command is printed before it runs. Its CSV output goes to OUT_DIR
# (default docs/results/raw/server), one file per (target, pipelining, round);
# bench/server/summarize.py turns them into the table of docs/results/server.md.
# ROUNDS (default 3) rounds per configuration; REQUESTS (default 200000); CLIENTS (default 50).
# redis-benchmark --cluster runs one thread per node and times a run in 250 ms steps, so the
# cluster rows use more requests: CLUSTER_REQUESTS_P16 (default 2000000) with -P 16 and
# CLUSTER_REQUESTS_P1 (default 500000) without pipelining, which keeps that step near 10% or less.
# TARGETS (default "splitkv redis splitkv-cluster redis-cluster") picks what runs.
# BENCH_WRAP, if set, is put in front of every redis-benchmark command (for example a `flock`
# on a shared lock file, so benchmarks of several users of one machine never overlap).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${1:-$REPO_ROOT/docs/results/raw/server}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
CLUSTER_REQUESTS_P16=${CLUSTER_REQUESTS_P16:-2000000}
CLUSTER_REQUESTS_P1=${CLUSTER_REQUESTS_P1:-500000}
TARGETS=${TARGETS:-splitkv redis splitkv-cluster redis-cluster}
TESTS=set,get,incr,mset,hset,zadd
read -r -a WRAP <<<"${BENCH_WRAP:-}"
SERVER_BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/splitkv-server"

run() {
    printf '+ %s\n' "$*" >&2
    "$@"
}

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    run "${sudo[@]}" apt-get update
    run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools
fi
(cd "$REPO_ROOT" && run cargo build --release -p splitkv-server)

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$OUT"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() {
    for _ in $(seq 100); do
        redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "port $1 never answered" >&2
    return 1
}

start_splitkv() { # port dir [flags...]
    local port=$1 dir=$2
    shift 2
    # Started directly (not through `run`) so that $! is the server itself, which stop_all kills.
    printf '+ %s\n' "$SERVER_BIN --dir $dir --port $port $*" >&2
    "$SERVER_BIN" --dir "$dir" --port "$port" "$@" >"$dir.log" 2>&1 &
    PIDS+=($!)
    wait_port "$port"
}

start_redis() { # port dir [flags...]
    local port=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    printf '+ %s\n' "redis-server --port $port --dir $dir --appendonly yes --appendfsync everysec --save '' $*" >&2
    redis-server --port "$port" --dir "$dir" --appendonly yes --appendfsync everysec --save '' "$@" >"$dir.log" 2>&1 &
    PIDS+=($!)
    wait_port "$port"
}

stop_all() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}

bench() { # name port requests-with-P16 requests-with-P1 [extra redis-benchmark flags...]
    local name=$1 port=$2
    local -A requests=([16]=$3 [1]=$4)
    shift 4
    for round in $(seq "$ROUNDS"); do
        for pipeline in 16 1; do
            local file="$OUT/$name-P$pipeline-round$round.csv"
            run "${WRAP[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -t "$TESTS" -n "${requests[$pipeline]}" -P "$pipeline" -c "$CLIENTS" --csv "$@" >"$file"
            cat "$file"
        done
    done
}

wanted() { [[ " $TARGETS " == *" $1 "* ]]; }

# Single nodes.
if wanted splitkv; then
    port=$(free_port)
    start_splitkv "$port" "$WORK/splitkv"
    bench splitkv "$port" "$REQUESTS" "$REQUESTS"
    stop_all
fi

if wanted redis; then
    port=$(free_port)
    start_redis "$port" "$WORK/redis"
    bench redis "$port" "$REQUESTS" "$REQUESTS"
    stop_all
fi

# Three-node clusters: splitkv-server with a fixed slot map, redis-server with cluster-enabled.
RANGES=(0-5460 5461-10922 10923-16383)
if wanted splitkv-cluster; then
ports=($(free_port) $(free_port) $(free_port))
for i in 0 1 2; do
    peers=()
    for j in 0 1 2; do
        [[ $j == "$i" ]] || peers+=(--cluster-node "node$j=127.0.0.1:${ports[$j]}@${RANGES[$j]}")
    done
    start_splitkv "${ports[$i]}" "$WORK/splitkv-node$i" --cluster-slots "${RANGES[$i]}" --cluster-myid "node$i" "${peers[@]}"
done
bench splitkv-cluster "${ports[0]}" "$CLUSTER_REQUESTS_P16" "$CLUSTER_REQUESTS_P1" --cluster
stop_all
fi

if wanted redis-cluster; then
ports=($(free_port) $(free_port) $(free_port))
for i in 0 1 2; do
    # The bus port defaults to port + 10000, which is out of range for high free ports.
    start_redis "${ports[$i]}" "$WORK/redis-node$i" --cluster-enabled yes --cluster-config-file "$WORK/redis-node$i.conf" \
        --cluster-port "$(free_port)"
done
run redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}" --cluster-replicas 0 --cluster-yes >/dev/null
# Wait until every node agrees that all slots are served.
for _ in $(seq 100); do
    ok=0
    for p in "${ports[@]}"; do redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' && ok=$((ok + 1)); done
    [[ $ok == 3 ]] && break
    sleep 0.2
done
bench redis-cluster "${ports[0]}" "$CLUSTER_REQUESTS_P16" "$CLUSTER_REQUESTS_P1" --cluster
stop_all
fi

python3 "$REPO_ROOT/bench/server/summarize.py" "$OUT"
