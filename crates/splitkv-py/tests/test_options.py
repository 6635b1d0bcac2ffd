"""DB(path, **options): every engine option by keyword, and mistakes refused before opening."""

import os

import pytest

import splitkv

# A valid non-default value for each option.
VALUES = {
    "create_if_missing": True,
    "error_if_exists": False,
    "value_threshold": 64,
    "write_buffer_size": 1 << 20,
    "segment_size": 4 << 20,
    "vlog_buffer_size": 64 << 10,
    "block_size": 2048,
    "block_restart_interval": 8,
    "compression": "lz4",
    "index_block_kind": "adaptive",
    "bloom_bits_per_key": 12,
    "block_cache_capacity": 8 << 20,
    "max_open_files": 100,
    "num_levels": 5,
    "level0_file_num_compaction_trigger": 3,
    "level0_slowdown_writes_trigger": 6,
    "level0_stop_writes_trigger": 10,
    "max_bytes_for_level_base": 8 << 20,
    "max_bytes_for_level_multiplier": 8.0,
    "target_file_size": 2 << 20,
    "max_background_compactions": 2,
    "compaction_policy": "time_slice",
    "time_slice_ms": 50,
    "time_slice_dynamic": True,
    "time_slice_drain_percent": 50,
    "gc_policy": "cost_benefit",
    "background_gc": False,
    "gc_garbage_ratio": 0.5,
    "gc_space_budget": 1 << 30,
    "gc_space_amplification": None,
    "gc_space_trigger": 0.7,
    "gc_punch_holes": True,
    "gc_logical_space_factor": 2,
    "gc_rate_limit": 0,
    "gc_in_compaction": False,
    "gc_compact_in_place": True,
    "index": "hash",
    "hash_capacity": 1024,
    "hash_shards": 1,
    "paranoid_checks": True,
    "prefetch_threads": 2,
}


def test_every_option_is_listed_and_accepted(db_path):
    assert sorted(VALUES) == sorted(splitkv.OPTION_NAMES)
    with splitkv.DB(db_path, **VALUES) as db:
        db[b"k"] = b"v" * 100
        db.flush()
        assert db[b"k"] == b"v" * 100
        assert db.stats()["hash_table"]["buckets"] >= 1024


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_compression_kinds(db_path, compression):
    with splitkv.DB(db_path, compression=compression, value_threshold=None) as db:
        for i in range(2000):
            db[b"%05d" % i] = b"compressible " * 10
        db.flush()
        assert db[b"01234"] == b"compressible " * 10


@pytest.mark.parametrize("kind", ["binary", "learned", "adaptive"])
def test_index_block_kinds(db_path, kind):
    with splitkv.DB(db_path, index_block_kind=kind, block_size=256) as db:
        for i in range(3000):
            db[b"%06d" % i] = b"v%d" % i
        db.flush()
        assert all(db[b"%06d" % i] == b"v%d" % i for i in range(0, 3000, 7))
        built = db.stats()["index_blocks"]["built_learned"]
        assert (built > 0) if kind == "learned" else (built == 0 or kind == "adaptive")
    with pytest.raises(ValueError):
        splitkv.DB(db_path, index_block_kind="btree")


def test_misspelt_option_is_a_type_error(db_path):
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'valu_threshold'.*'value_threshold'"):
        splitkv.DB(db_path, valu_threshold=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_thing'$"):
        splitkv.DB(db_path, no_such_thing=1)
    assert not os.path.exists(db_path)


@pytest.mark.parametrize(
    "name, value",
    [
        ("block_size", "4096"),
        ("block_size", True),
        ("block_size", 4096.0),
        ("create_if_missing", 1),
        ("compression", 1),
        ("gc_garbage_ratio", "0.5"),
        ("gc_garbage_ratio", False),
    ],
)
def test_wrong_type_is_a_type_error(db_path, name, value):
    with pytest.raises(TypeError, match=f"option {name} must be"):
        splitkv.DB(db_path, **{name: value})


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(block_size=-1),
        dict(compression="snappy"),
        dict(index="btree"),
        dict(gc_policy="newest"),
        dict(compaction_policy="fifo"),
        dict(compaction_policy="time_slice"),  # without time_slice_ms
        dict(time_slice_ms=10),  # without compaction_policy="time_slice"
        dict(compaction_policy="time_slice", time_slice_ms=10, time_slice_drain_percent=101),
        dict(hash_capacity=10),  # without index="hash"
    ],
)
def test_impossible_value_is_a_value_error(db_path, kwargs):
    with pytest.raises(ValueError):
        splitkv.DB(db_path, **kwargs)


def test_missing_and_existing_databases(db_path):
    with pytest.raises(splitkv.InvalidArgumentError, match="does not exist"):
        splitkv.DB(db_path, create_if_missing=False)
    splitkv.DB(db_path).close()
    with pytest.raises(splitkv.InvalidArgumentError, match="already exists"):
        splitkv.DB(db_path, error_if_exists=True)


def test_value_threshold_none_keeps_values_inline(db_path):
    with splitkv.DB(db_path, value_threshold=None) as db:
        db[b"k"] = b"x" * 100_000
        db.flush()
        assert db[b"k"] == b"x" * 100_000
        # An inline value is read from its table, never from the value log.
        assert db.stats()["vlog_reads"] == 0
