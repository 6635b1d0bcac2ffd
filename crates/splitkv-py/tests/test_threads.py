"""Threads share one database: readers see consistent values while a writer writes, and the
GIL is released while the engine works."""

import sys
import threading
import time

import splitkv


def value_of(key, version):
    return key + b"=%03d" % version + b"." * 40


def version_of(key, value):
    return int(value[len(key) + 1:len(key) + 4])


def test_readers_while_one_writes(db):
    keys = [b"%04d" % i for i in range(300)]
    for k in keys:
        db[k] = value_of(k, 0)
    versions = 15
    done = threading.Event()
    failures = []

    def writer():
        try:
            for version in range(1, versions + 1):
                with db.write_batch() as batch:
                    for k in keys:
                        batch.put(k, value_of(k, version))
        finally:
            done.set()

    def reader(seed):
        try:
            while not done.is_set():
                for k in keys[seed::7]:
                    v = db[k]
                    if v != value_of(k, version_of(k, v)):
                        failures.append((k, v))
                # A scan sees one batch's version for every key: batches are atomic and an
                # iterator reads one point in time.
                seen = {version_of(k, v) for k, v in db.iterator()}
                if len(seen) != 1:
                    failures.append(("torn scan", sorted(seen)[:3]))
        except Exception as e:  # noqa: BLE001 - reported to the main thread
            failures.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert all(db[k] == value_of(k, versions) for k in keys)


def test_python_threads_run_during_an_engine_call(db_path):
    """While one thread is inside `compact_range`, another runs Python code.

    With a switch interval far longer than the test, a thread holding the GIL keeps it until it
    blocks: the spinner, which gives the GIL up at every step (`time.sleep(0)`), can only run
    while the caller is blocked. The caller reads the counter just before and just after the
    call, so the counter moves between those reads only if the call released the GIL (with the
    GIL held throughout, it cannot move at all).

    One call's window can close before the operating system schedules the spinner when every
    core is busy, so each call is given a fresh overlapping table to merge, and the caller tries
    up to `CALLS` times; one call that lets the spinner run is the proof. A build that holds the
    GIL fails every call."""
    CALLS = 30
    with splitkv.DB(db_path, value_threshold=None) as db:
        keys = [b"%08d" % i for i in range(20_000)]
        for k in keys:
            db[k] = b"v" * 200
        db.flush()
        counter = [0]
        progress = []
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                counter[0] += 1
                time.sleep(0)

        old_interval = sys.getswitchinterval()
        sys.setswitchinterval(1000.0)
        spinner = threading.Thread(target=spin)
        spinner.start()
        try:
            for call in range(CALLS):
                # Outside the window: a table overlapping the compacted one, so the call merges.
                for k in keys[call % 7::7]:
                    db[k] = b"w" * 200
                db.flush()
                before = counter[0]
                db.compact_range()
                after = counter[0]
                progress.append(after - before)
                if after > before:
                    break
        finally:
            stop.set()
            spinner.join()
            sys.setswitchinterval(old_interval)
        assert any(p > 0 for p in progress), progress
