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
# BENCH_WRAP, if set, is put in front of every redis-benchmark command (for example a `flock`
# on a shared lock file, so benchmarks of several users of one machine never overlap).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${1:-$REPO_ROOT/docs/results/raw/server}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
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
    run "$SERVER_BIN" --dir "$dir" --port "$port" "$@" >"$dir.log" 2>&1 &
    PIDS+=($!)
    wait_port "$port"
}

start_redis() { # port dir [flags...]
    local port=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    run redis-server --port "$port" --dir "$dir" --appendonly yes --appendfsync everysec --save '' "$@" >"$dir.log" 2>&1 &
    PIDS+=($!)
    wait_port "$port"
}

stop_all() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}

bench() { # name port [extra redis-benchmark flags...]
    local name=$1 port=$2
    shift 2
    for round in $(seq "$ROUNDS"); do
        for pipeline in 16 1; do
            local file="$OUT/$name-P$pipeline-round$round.csv"
            run "${WRAP[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -t "$TESTS" -n "$REQUESTS" -P "$pipeline" -c "$CLIENTS" --csv "$@" >"$file"
            cat "$file"
        done
    done
}

# Single nodes.
port=$(free_port)
start_splitkv "$port" "$WORK/splitkv"
bench splitkv "$port"
stop_all

port=$(free_port)
start_redis "$port" "$WORK/redis"
bench redis "$port"
stop_all

# Three-node clusters: splitkv-server with a fixed slot map, redis-server with cluster-enabled.
RANGES=(0-5460 5461-10922 10923-16383)
ports=($(free_port) $(free_port) $(free_port))
for i in 0 1 2; do
    peers=()
    for j in 0 1 2; do
        [[ $j == "$i" ]] || peers+=(--cluster-node "node$j=127.0.0.1:${ports[$j]}@${RANGES[$j]}")
    done
    start_splitkv "${ports[$i]}" "$WORK/splitkv-node$i" --cluster-slots "${RANGES[$i]}" --cluster-myid "node$i" "${peers[@]}"
done
bench splitkv-cluster "${ports[0]}" --cluster
stop_all

ports=($(free_port) $(free_port) $(free_port))
for i in 0 1 2; do
    start_redis "${ports[$i]}" "$WORK/redis-node$i" --cluster-enabled yes --cluster-config-file "$WORK/redis-node$i.conf"
done
run redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}" --cluster-replicas 0 --cluster-yes >/dev/null
# Wait until every node agrees that all slots are served.
for _ in $(seq 100); do
    ok=0
    for p in "${ports[@]}"; do redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' && ok=$((ok + 1)); done
    [[ $ok == 3 ]] && break
    sleep 0.2
done
bench redis-cluster "${ports[0]}" --cluster
stop_all

python3 "$REPO_ROOT/bench/server/summarize.py" "$OUT"
