"""Point operations, the dict protocol, maintenance calls, reports, close and reopen."""

import os

import pytest

import splitkv


def test_put_get_delete(db):
    db.put(b"k1", b"v1")
    db.put(b"k2", b"v2", sync=True)
    assert db.get(b"k1") == b"v1"
    assert db.get(b"k2") == b"v2"
    assert db.get(b"missing") is None
    assert db.get(b"missing", b"fallback") == b"fallback"
    assert db.get(b"k1", default=b"fallback", fill_cache=False, verify_checksums=True) == b"v1"
    db.delete(b"k1")
    db.delete(b"never-there", sync=True)
    assert db.get(b"k1") is None
    db.put(b"k2", b"v2b")
    assert db.get(b"k2") == b"v2b"


def test_dict_protocol(db):
    db[b"a"] = b"1"
    db[b"b"] = bytearray(b"2")
    assert db[b"a"] == b"1"
    assert db[bytearray(b"b")] == b"2"
    assert b"a" in db
    assert b"zz" not in db
    with pytest.raises(KeyError) as info:
        db[b"zz"]
    assert info.value.args == (b"zz",)
    del db[b"a"]
    assert b"a" not in db
    del db[b"a"]  # like delete(): no KeyError for an absent key
    assert list(db) == [b"b"]


def test_bytes_in_and_out(db):
    binary = bytes(range(256)) * 40  # large enough to be separated by the default threshold
    db[b"\x00\xff"] = binary
    db[b""] = b""
    value = db[b"\x00\xff"]
    assert type(value) is bytes and value == binary
    assert db[b""] == b""
    assert db.multi_get([b"\x00\xff", b"nope", b""]) == [binary, None, b""]


@pytest.mark.parametrize("bad", ["text", 7, None, 1.5])
def test_non_bytes_refused(db, bad):
    with pytest.raises(TypeError) as info:
        db.put(bad, b"v")
    if isinstance(bad, str):
        assert "must be bytes, not str" in str(info.value)
    with pytest.raises(TypeError):
        db.put(b"k", bad)
    with pytest.raises(TypeError):
        db[bad]
    with pytest.raises(TypeError):
        db.get(bad)


def test_values_survive_flush_compaction_and_gc(db):
    model = {}
    for round_ in range(3):
        for i in range(400):
            key = b"key%05d" % i
            value = (b"%d-%d-" % (round_, i)) * (i % 50 + 1)
            db[key] = value
            model[key] = value
        for i in range(0, 400, 7):
            key = b"key%05d" % i
            del db[key]
            model.pop(key, None)
    db.flush()
    db.compact_range(b"key00100", b"key00200")
    db.compact_range()
    outcome = db.run_gc()
    assert set(outcome) == {
        "victim", "bytes_read", "records_relocated", "bytes_relocated", "bytes_punched", "segments_released"
    }
    assert all(isinstance(s, int) for s in outcome["segments_released"])
    assert dict(db.iterator()) == model
    assert all(db[k] == v for k, v in model.items())


def test_stats_and_properties(db):
    for i in range(500):
        db[b"k%04d" % i] = b"x" * 1000
    db.flush()
    stats = db.stats()
    assert stats["user_bytes_written"] >= 500 * 1000
    assert stats["write_amplification"] >= 1.0
    assert stats["last_sequence"] == 500
    assert stats["vlog_bytes"] == sum(s["bytes"] for s in stats["segments"])
    assert stats["sstable_bytes"] == sum(level["bytes"] for level in stats["levels"])
    assert isinstance(stats["log_head"], tuple) and len(stats["log_head"]) == 2
    assert db.approximate_len == 500
    assert db.property("splitkv.last-sequence") == "500"
    assert "Value log" in db.property("splitkv.stats")
    assert db.property("splitkv.no-such-property") is None


def test_stats_name_the_index(db_path, options):
    with splitkv.DB(db_path, **options) as db:
        table = db.stats()["hash_table"]
        if options["index"] == "hash":
            assert table["buckets"] >= 256
        else:
            assert table is None


def test_close_and_context_manager(db_path, options):
    db = splitkv.DB(db_path, **options)
    db[b"k"] = b"v"
    assert not db.closed
    assert "open" in repr(db)
    db.close()
    db.close()  # idempotent
    assert db.closed and "closed" in repr(db)
    for call in (lambda: db[b"k"], lambda: db.put(b"k", b"v"), lambda: db.stats(), lambda: db.iterator()):
        with pytest.raises(splitkv.ClosedError):
            call()
    with splitkv.DB(db_path, **options) as db2:
        assert db2[b"k"] == b"v"
        assert db2.path == db_path
    assert db2.closed


def test_reopen_keeps_every_write(db_path, options):
    with splitkv.DB(db_path, **options) as db:
        for i in range(2000):
            db[b"%06d" % i] = os.urandom(8) * (i % 30)
        expected = dict(db.iterator())
        db.delete(b"000007")
        del expected[b"000007"]
    # Reopened with the same options (the hash table's size comes from its file).
    with splitkv.DB(db_path, **options) as db:
        assert dict(db.iterator()) == expected
        db[b"after"] = b"reopen"
    with splitkv.DB(db_path, **options) as db:
        assert db[b"after"] == b"reopen"
        assert db.approximate_len >= len(expected)


def test_iterators_of_a_closed_database_are_closed(db_path, options):
    db = splitkv.DB(db_path, **options)
    for i in range(100):
        db[b"%03d" % i] = b"v"
    it = db.iterator()
    assert next(it) == (b"000", b"v")
    db.close()
    with pytest.raises(splitkv.ClosedError):
        next(it)
    # The iterator no longer holds the database: it can be reopened while `it` is alive.
    with splitkv.DB(db_path, **options) as again:
        assert again[b"050"] == b"v"
