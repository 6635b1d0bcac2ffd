#!/usr/bin/env python3
"""Put, get and iterate throughput from Python: splitkv against plyvel (LevelDB) and rocksdict
(RocksDB), in one process, one run, the same keys and values for every engine.

Each round runs every engine on a fresh database, in a rotated order so no engine always runs
first or last: fillrandom (one put per key, shuffled order), then close and reopen, readrandom
(one get per key, shuffled again, every key present) and readseq (one forward iteration over
every item). Keys are 16 decimal digits (db_bench's format), values random bytes (they do not
compress). Each engine runs with its defaults and without sync, keys and values as bytes
(rocksdict in raw mode). The summary gives the median of the rounds and splitkv's ratio to each
peer (above 1: splitkv is faster).

    pip install ./crates/splitkv-py plyvel rocksdict
    python crates/splitkv-py/bench/compare.py --num 200000 --value-size 100 --rounds 5
"""

import argparse
import gc
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time


class Splitkv:
    name = "splitkv"

    @staticmethod
    def version():
        import splitkv

        return splitkv.__version__

    @staticmethod
    def open(path):
        import splitkv

        return splitkv.DB(path)

    @staticmethod
    def items(db):
        return db.iterator()


class Plyvel:
    name = "plyvel"

    @staticmethod
    def version():
        import plyvel

        return "%s (LevelDB %s)" % (plyvel.__version__, plyvel.__leveldb_version__)

    @staticmethod
    def open(path):
        import plyvel

        return plyvel.DB(path, create_if_missing=True)

    @staticmethod
    def items(db):
        return db.iterator()


class Rocksdict:
    name = "rocksdict"

    @staticmethod
    def version():
        from importlib.metadata import version

        return version("rocksdict")

    @staticmethod
    def open(path):
        import rocksdict

        return rocksdict.Rdict(path, options=rocksdict.Options(raw_mode=True))

    @staticmethod
    def items(db):
        return db.items()


ENGINES = {e.name: e for e in (Splitkv, Plyvel, Rocksdict)}
OPS = ("fillrandom", "readrandom", "readseq")


def run_engine(engine, path, keys, fill_order, read_order, values):
    """Runs the three phases; returns {op: ops per second}."""
    results = {}
    db = engine.open(path)
    put = db.put
    gc.disable()  # the collector's pauses would land on whichever engine runs when it fires
    try:
        start = time.perf_counter()
        for i in fill_order:
            put(keys[i], values[i])
        results["fillrandom"] = len(fill_order) / (time.perf_counter() - start)
        db.close()

        db = engine.open(path)
        get = db.get
        start = time.perf_counter()
        found = 0
        for i in read_order:
            if get(keys[i]) is not None:
                found += 1
        results["readrandom"] = len(read_order) / (time.perf_counter() - start)
        if found != len(read_order):
            raise SystemExit("%s: readrandom found %d of %d keys" % (engine.name, found, len(read_order)))

        start = time.perf_counter()
        count = 0
        for _key, _value in engine.items(db):
            count += 1
        results["readseq"] = count / (time.perf_counter() - start)
        if count != len(keys):
            raise SystemExit("%s: readseq saw %d of %d items" % (engine.name, count, len(keys)))
    finally:
        gc.enable()
        db.close()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num", type=int, default=200_000, help="keys per database")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the summary gives medians)")
    parser.add_argument("--engines", default="splitkv,plyvel,rocksdict", help="comma-separated")
    parser.add_argument("--dir", default=None, help="where databases are made (default: a temporary directory)")
    parser.add_argument("--seed", type=int, default=301)
    args = parser.parse_args()

    engines = [ENGINES[name] for name in args.engines.split(",")]
    rng = random.Random(args.seed)
    keys = [b"%016d" % i for i in range(args.num)]
    values = [rng.randbytes(args.value_size) if hasattr(rng, "randbytes") else os.urandom(args.value_size)
              for _ in range(args.num)]
    fill_order = list(range(args.num))
    rng.shuffle(fill_order)
    read_order = list(range(args.num))
    rng.shuffle(read_order)

    print("command: python crates/splitkv-py/bench/compare.py %s" % " ".join(sys.argv[1:]))
    print("python %s on %s, %d CPUs" % (platform.python_version(), platform.platform(), os.cpu_count()))
    for e in engines:
        print("%s %s" % (e.name, e.version()))
    print("num=%d value_size=%d rounds=%d" % (args.num, args.value_size, args.rounds))

    base = args.dir or tempfile.mkdtemp(prefix="kvbench-")
    results = {e.name: {op: [] for op in OPS} for e in engines}
    for round_ in range(args.rounds):
        order = engines[round_ % len(engines):] + engines[:round_ % len(engines)]
        for e in order:
            path = os.path.join(base, e.name)
            shutil.rmtree(path, ignore_errors=True)
            got = run_engine(e, path, keys, fill_order, read_order, values)
            shutil.rmtree(path, ignore_errors=True)
            for op in OPS:
                results[e.name][op].append(got[op])
            print("round %d %-9s " % (round_ + 1, e.name)
                  + " ".join("%s=%.0f ops/s" % (op, got[op]) for op in OPS), flush=True)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)

    print()
    print("medians (ops/s) of %d rounds, num=%d value_size=%d" % (args.rounds, args.num, args.value_size))
    print("%-9s %12s %12s %12s" % ("engine", *OPS))
    medians = {name: {op: statistics.median(v) for op, v in r.items()} for name, r in results.items()}
    for name, m in medians.items():
        print("%-9s %12.0f %12.0f %12.0f" % (name, *(m[op] for op in OPS)))
    if "splitkv" in medians:
        for name, m in medians.items():
            if name != "splitkv":
                print("splitkv/%-9s" % name + "".join(
                    " %s=%.2fx" % (op, medians["splitkv"][op] / m[op]) for op in OPS))


if __name__ == "__main__":
    main()
