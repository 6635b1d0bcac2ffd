"""Engine errors arrive as splitkv exceptions carrying the engine's message."""

import glob
import os

import pytest

import splitkv


def test_hierarchy():
    for cls in (splitkv.IoError, splitkv.CorruptionError, splitkv.PoisonedError, splitkv.InvalidArgumentError,
                splitkv.LockedError, splitkv.NoSpaceError, splitkv.ClosedError):
        assert issubclass(cls, splitkv.Error)
        assert cls.__module__ == "splitkv"
    assert issubclass(splitkv.Error, Exception)


def test_second_handle_is_locked(db_path):
    with splitkv.DB(db_path):
        with pytest.raises(splitkv.LockedError, match="is locked"):
            splitkv.DB(db_path)
    splitkv.DB(db_path).close()


def test_corrupt_value_log_is_reported_with_file_and_offset(db_path):
    value = b"precious value " * 100
    with splitkv.DB(db_path, value_threshold=0, background_gc=False) as db:
        db[b"key"] = value
        db.flush()  # the log head moves past the record: reopening does not replay it
    (segment,) = glob.glob(os.path.join(db_path, "*.vlog"))
    with open(segment, "r+b") as f:
        data = f.read()
        offset = data.index(value) + 10
        f.seek(offset)
        f.write(b"X")
    with splitkv.DB(db_path, value_threshold=0, background_gc=False) as db:
        with pytest.raises(splitkv.CorruptionError) as info:
            db[b"key"]
        message = str(info.value)
        assert os.path.basename(segment) in message and "offset" in message
        with pytest.raises(splitkv.CorruptionError):
            list(db.iterator())
        # Errors are raised, not swallowed, and the database stays usable.
        db[b"other"] = b"fine"
        assert db[b"other"] == b"fine"


def test_no_space_under_a_budget(db_path):
    with splitkv.DB(db_path, value_threshold=0, segment_size=64 << 10, gc_space_budget=256 << 10,
                    gc_space_amplification=None) as db:
        with pytest.raises(splitkv.NoSpaceError, match="no space"):
            for i in range(100_000):
                db[b"%08d" % i] = b"v" * 1000
