# Shared by the benchmark scripts in this directory: installs the system libraries the peer
# engines need, builds splitkv-bench with every engine, and runs commands while printing them.
# Source it; do not run it.

set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Debian's multiarch library directory, where librocksdb-dev puts librocksdb.so; the rocksdb
# crate links against the library found there instead of compiling RocksDB from source.
export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-/usr/lib/x86_64-linux-gnu}
BENCH_BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/splitkv-bench"

# Prints a command the way a shell trace would, then runs it.
run() {
    printf '+ %s\n' "$*" >&2
    "$@"
}

# Empties the page cache (as root; otherwise does nothing), so that every run starts with the
# executable and the peers' shared libraries read afresh from disk. How a binary's pages sit in
# the cache depends on how the file was written: the 100 B readseq of one splitkv-bench binary
# measured 0.067 µs straight after the linker wrote it and 0.053 µs after the cache was dropped
# (or from a copy), while LevelDB's library, installed long before, ran from settled pages.
drop_page_cache() {
    if [[ -w /proc/sys/vm/drop_caches ]]; then
        sync
        echo 3 >/proc/sys/vm/drop_caches
    fi
}

# Installs the Debian packages the peer engines and the report need, if any is missing.
install_packages() {
    local packages=(librocksdb-dev libclang-dev libleveldb-dev jq)
    local missing=()
    for package in "${packages[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if ((${#missing[@]} == 0)); then
        return
    fi
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        sudo=(sudo)
    fi
    run "${sudo[@]}" apt-get update
    run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
}

build_bench() {
    (cd "$REPO_ROOT" && run env ROCKSDB_LIB_DIR="$ROCKSDB_LIB_DIR" \
        cargo build --release -p splitkv-bench --features leveldb,rocksdb,fjall)
}

# `scaled N` prints N * SCALE rounded down, at least `min` (default 1).
scaled() {
    local n=$1 min=${2:-1}
    awk -v n="$n" -v s="$SCALE" -v m="$min" 'BEGIN { v = int(n * s); if (v < m) v = m; print v }'
}

# Engine flags for a configuration name: splitkv, leveldb, rocksdb, rocksdb-blob, fjall (its
# key-value separation at splitkv's default threshold).
engine_flags() {
    case $1 in
        splitkv) echo "--engine=splitkv" ;;
        leveldb) echo "--engine=leveldb" ;;
        rocksdb) echo "--engine=rocksdb" ;;
        rocksdb-blob) echo "--engine=rocksdb --enable_blob_files=true --min_blob_size=${MIN_BLOB_SIZE}" ;;
        fjall) echo "--engine=fjall" ;;
        *) echo "unknown engine configuration $1" >&2; return 1 ;;
    esac
}
