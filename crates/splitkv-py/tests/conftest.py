"""Fixtures: databases of each index kind and value placement, with tiny memtables, segments
and files so that small tests reach flushes, compactions and several value-log segments."""

import pytest

import splitkv

# Value placements: every value separated (WiscKey), the default threshold, never separated.
CASES = {
    "lsm-separated": dict(index="lsm", value_threshold=0),
    "lsm-default": dict(index="lsm"),
    "lsm-inline": dict(index="lsm", value_threshold=None),
    "hash": dict(index="hash", hash_capacity=256),
}

SMALL = dict(
    write_buffer_size=32 << 10,
    segment_size=128 << 10,
    vlog_buffer_size=4 << 10,
    block_size=1024,
    target_file_size=32 << 10,
    max_bytes_for_level_base=128 << 10,
    block_cache_capacity=1 << 20,
)


@pytest.fixture(params=sorted(CASES))
def options(request):
    """Keyword arguments of a small database of each case."""
    return dict(SMALL, **CASES[request.param])


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(db_path, options):
    with splitkv.DB(db_path, **options) as handle:
        yield handle
