#!/usr/bin/env bash
# Builds LevelDB's own db_bench (benchmarks/db_bench.cc of the 1.23 release) against the system
# LevelDB (Debian: libleveldb-dev 1.23): its public headers and shared library, plus the few
# internal utility sources the benchmark compiles in (histogram, crc32c, test strings).
#
# Two deviations from the release's source, both mechanical:
# - util/testutil.h is replaced by the declarations db_bench uses; the original pulls in
#   googletest and the in-memory Env, which the benchmark does not need.
# - the `--compression=0|1` flag is back-ported (upstream db_bench gained it after 1.23; 1.23
#   always uses Snappy), so LevelDB can run with compression off like every other engine here.
#
# usage: bench/peers/build_leveldb_db_bench.sh SRC OUT_BINARY
#   SRC: a checkout of https://github.com/google/leveldb at tag 1.23
set -euo pipefail
SRC=${1:?usage: build_leveldb_db_bench.sh SRC OUT_BINARY}
OUT=${2:?usage: build_leveldb_db_bench.sh SRC OUT_BINARY}
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT

mkdir -p "$BUILD/util" "$BUILD/port"
cp "$SRC/benchmarks/db_bench.cc" "$BUILD/"
for file in histogram.cc histogram.h crc32c.cc crc32c.h coding.h mutexlock.h random.h testutil.cc; do
    cp "$SRC/util/$file" "$BUILD/util/"
done
cp "$SRC/port/port.h" "$SRC/port/port_stdcxx.h" "$SRC/port/thread_annotations.h" "$BUILD/port/"

cat >"$BUILD/port/port_config.h" <<'CONFIG'
#ifndef STORAGE_LEVELDB_PORT_PORT_CONFIG_H_
#define STORAGE_LEVELDB_PORT_PORT_CONFIG_H_
#define HAVE_FDATASYNC 1
#define HAVE_FULLFSYNC 0
#define HAVE_O_CLOEXEC 1
#define HAVE_CRC32C 0
#define HAVE_SNAPPY 0
#endif
CONFIG

cat >"$BUILD/util/testutil.h" <<'TESTUTIL'
#ifndef STORAGE_LEVELDB_UTIL_TESTUTIL_H_
#define STORAGE_LEVELDB_UTIL_TESTUTIL_H_
#include <string>
#include "leveldb/slice.h"
#include "util/random.h"
namespace leveldb {
namespace test {
Slice RandomString(Random* rnd, int len, std::string* dst);
std::string RandomKey(Random* rnd, int len);
Slice CompressibleString(Random* rnd, double compressed_fraction, size_t len, std::string* dst);
}  // namespace test
}  // namespace leveldb
#endif
TESTUTIL

# Back-port `--compression`: the flag, its parsing, and its use in Open().
perl -0pi -e '
    s/(static bool FLAGS_reuse_logs = false;\n)/$1static bool FLAGS_compression = true;\n/;
    s/(\n(\s*)options\.filter_policy = filter_policy_;\n)/$1$2options.compression = FLAGS_compression ? kSnappyCompression : kNoCompression;\n/;
    s/(\} else if \(sscanf\(argv\[i\], "--reuse_logs=%d%c")/} else if (sscanf(argv[i], "--compression=%d%c", &n, &junk) == 1 \&\&\n               (n == 0 || n == 1)) {\n      FLAGS_compression = n;\n    $1/;
' "$BUILD/db_bench.cc"
if [[ $(grep -c FLAGS_compression\\b "$BUILD/db_bench.cc") -ne 3 ]]; then
    echo "the --compression back-port did not apply to $SRC/benchmarks/db_bench.cc" >&2
    exit 1
fi

# No -I for the checkout's include/: `leveldb/*.h` come from the system, matching the library.
g++ -O2 -DNDEBUG -DLEVELDB_PLATFORM_POSIX -std=c++17 -I "$BUILD" "$BUILD/db_bench.cc" "$BUILD"/util/*.cc -lleveldb -lpthread -o "$OUT"
