"""Write batches (atomic, discarded on exception) and snapshots (consistent views)."""

import pytest

import splitkv


def test_batch_is_applied_atomically_in_order(db):
    db[b"gone"] = b"x"
    batch = db.write_batch()
    batch.put(b"a", b"1")
    batch.put(b"b", b"2")
    batch.delete(b"gone")
    batch.put(b"a", b"3")  # later operations win
    assert len(batch) == 4
    assert b"a" not in db  # nothing is written before write()
    batch.write()
    assert len(batch) == 0
    assert dict(db.iterator()) == {b"a": b"3", b"b": b"2"}


def test_batch_context_manager(db):
    with db.write_batch(sync=True) as batch:
        for i in range(100):
            batch.put(b"%03d" % i, b"v")
    assert len(list(db)) == 100


def test_exception_discards_the_batch(db):
    with pytest.raises(RuntimeError):
        with db.write_batch() as batch:
            batch.put(b"never", b"written")
            batch.delete(b"000")
            raise RuntimeError("abort")
    assert b"never" not in db
    assert list(db) == []


def test_batch_clear_and_type_checks(db):
    batch = db.write_batch()
    batch.put(b"k", b"v")
    batch.clear()
    batch.write()
    assert b"k" not in db
    with pytest.raises(TypeError):
        batch.put("k", b"v")
    with pytest.raises(TypeError):
        batch.delete(1)


def test_batch_of_a_closed_database(db_path, options):
    db = splitkv.DB(db_path, **options)
    batch = db.write_batch()
    batch.put(b"k", b"v")
    db.close()
    with pytest.raises(splitkv.ClosedError):
        batch.write()


def test_snapshot_sees_no_later_write(db):
    for i in range(200):
        db[b"%03d" % i] = b"before"
    with db.snapshot() as snap:
        for i in range(200):
            db[b"%03d" % i] = b"after"
        db.delete(b"005")
        db[b"new"] = b"x"
        db.flush()
        db.compact_range()
        assert snap[b"005"] == b"before"
        assert snap.get(b"new") is None
        assert snap.get(b"new", b"dflt") == b"dflt"
        assert b"new" not in snap and b"005" in snap
        assert snap.multi_get([b"000", b"new"]) == [b"before", None]
        assert list(snap.iterator(include_key=False)) == [b"before"] * 200
        assert list(snap.iterator(start=b"190", reverse=True, include_value=False)) == [
            b"%03d" % i for i in range(199, 189, -1)
        ]
        assert list(snap)[:2] == [b"000", b"001"]
        with pytest.raises(KeyError):
            snap[b"new"]
        it = snap.iterator(prefix=b"00")
    with pytest.raises(splitkv.ClosedError, match="released"):
        snap[b"000"]
    # An iterator made from the snapshot keeps its own view.
    assert len(list(it)) == 10
    assert db[b"000"] == b"after"


def test_delete_range_removes_a_key_range_and_snapshots_keep_it(db):
    for i in range(300):
        db.put(b"k%03d" % i, b"v%d" % i)
    snap = db.snapshot()
    db.delete_range(b"k100", b"k200")
    assert db.get(b"k099") == b"v99"
    assert db.get(b"k100") is None and db.get(b"k199") is None
    assert db.get(b"k200") == b"v200"
    assert len(list(db)) == 200
    assert snap.get(b"k150") == b"v150"  # a snapshot from before the delete still sees it
    db.delete_range(b"k250", b"k250")  # an empty range deletes nothing
    assert db.get(b"k250") == b"v250"
    with db.write_batch() as batch:
        batch.delete_range(b"k000", b"k050")
        batch.put(b"k010", b"new")  # written after the range delete: kept
    assert db.get(b"k000") is None and db.get(b"k010") == b"new"
    with pytest.raises(TypeError):
        db.delete_range("text", b"k")
