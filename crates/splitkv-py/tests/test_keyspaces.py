"""Keyspaces: isolation from each other and from the database's own keys, the reserved prefix,
persistence, batches spanning keyspaces, drops, snapshot reads and iterators."""

import pytest

import splitkv

RESERVED = b"\xff\xff\xff\xff"


def fill(target, n, tag):
    for i in range(n):
        target[b"k%03d" % i] = b"%s%d" % (tag, i)


def test_keyspaces_are_isolated(db):
    a, b = db.keyspace("a"), db.keyspace("b")
    assert (a.name, b.name, repr(a)) == ("a", "b", "<splitkv.Keyspace \"a\">")
    assert db.keyspace_names() == ["a", "b"]
    fill(db, 300, b"d")
    fill(a, 200, b"a")
    b.put(b"k100", b"only-b", sync=True)
    for phase in ("memtable", "flushed", "compacted"):
        if phase == "flushed":
            db.flush()
        elif phase == "compacted":
            db.compact_range()
        assert db[b"k150"] == b"d150" and a[b"k150"] == b"a150" and b.get(b"k150") is None, phase
        assert b"k250" in db and b"k250" not in a and b"k100" in b, phase
        assert a.get(b"k250", b"dflt") == b"dflt"
        with pytest.raises(KeyError):
            b[b"k000"]
        assert len(list(db)) == 300 and len(list(a)) == 200 and list(b) == [b"k100"], phase
        assert dict(b.iterator()) == {b"k100": b"only-b"}, phase
        assert a.multi_get([b"k001", b"k250", b"k199"]) == [b"a1", None, b"a199"], phase
        assert b.multi_get([b"k100"]) == [b"only-b"], phase
    a.delete(b"k001")
    del a[b"k002"]
    a.delete_range(b"k010", b"k100")
    assert db[b"k001"] == b"d1" and db[b"k050"] == b"d50"
    assert a.get(b"k001") is None and a.get(b"k002") is None and a.get(b"k050") is None
    assert a[b"k000"] == b"a0" and a[b"k100"] == b"a100"
    assert len(list(a)) == 200 - 2 - 90
    db.delete_range(b"k000", b"k200")
    assert a[b"k150"] == b"a150" and b[b"k100"] == b"only-b"
    with pytest.raises(TypeError):
        a.put("text", b"v")
    with pytest.raises(TypeError):
        db.keyspace(b"bytes-name")


def test_reserved_keys_are_refused_by_the_database_but_not_by_keyspaces(db):
    ks = db.keyspace("ks")
    key = RESERVED + b"\x00\x00\x00\x01k"
    for call in (
        lambda: db.put(key, b"v"),
        lambda: db.__setitem__(RESERVED, b"v"),
        lambda: db.get(key),
        lambda: key in db,
        lambda: db.delete(key),
        lambda: db.multi_get([key]),
        lambda: db.multi_get([b"fine", key]),  # a batch of several keys too
    ):
        with pytest.raises(splitkv.InvalidArgumentError, match="reserved"):
            call()
    batch = db.write_batch()
    batch.put(b"fine", b"v")
    batch.put(key, b"v")
    with pytest.raises(splitkv.InvalidArgumentError, match="reserved"):
        batch.write()
    assert b"fine" not in db  # the whole batch was refused
    ks[key] = b"in-ks"
    assert ks[key] == b"in-ks" and list(ks) == [key]
    db[b"\xff\xff\xff"] = b"short"  # three 0xff bytes are an ordinary key
    assert list(db) == [b"\xff\xff\xff"]
    assert list(db.iterator(start=b"\xff")) == [(b"\xff\xff\xff", b"short")]
    assert list(db.iterator(prefix=b"\xff\xff\xff")) == [(b"\xff\xff\xff", b"short")]


def test_keyspaces_persist_across_reopen(db_path, options):
    with splitkv.DB(db_path, **options) as db:
        fill(db.keyspace("users"), 100, b"u")
        fill(db.keyspace("gone"), 10, b"g")
        db.keyspace("empty")
        db[b"k000"] = b"own"
        assert db.drop_keyspace("gone")
        old = db.keyspace("users")
    with pytest.raises(splitkv.ClosedError):
        old.get(b"k000")  # a handle is of the DB object that made it
    with splitkv.DB(db_path, **options) as db:
        assert db.keyspace_names() == ["empty", "users"]
        users = db.keyspace("users")
        assert users[b"k042"] == b"u42" and len(list(users)) == 100
        assert db[b"k000"] == b"own" and list(db.keyspace("empty")) == []
        assert list(db.keyspace("gone")) == []  # created anew, empty
        with pytest.raises(ValueError, match="another database handle"):
            db.snapshot().get(b"k000", keyspace=old)
        with pytest.raises(ValueError, match="another database handle"):
            db.write_batch().put(b"k", b"v", keyspace=old)


def test_a_batch_spans_keyspaces_atomically(db):
    a, b = db.keyspace("a"), db.keyspace("b")
    a[b"gone"] = b"x"
    b[b"range1"] = b"x"
    batch = db.write_batch(sync=True)
    batch.put(b"k", b"own")
    batch.put(b"k", b"in-a", keyspace=a)
    batch.put(b"k", b"in-b", keyspace=b)
    batch.delete(b"gone", keyspace=a)
    batch.delete_range(b"range", b"rangf", keyspace=b)
    assert len(batch) == 5
    assert b"k" not in a and b"k" not in db  # nothing before write()
    batch.write()
    assert (db[b"k"], a[b"k"], b[b"k"]) == (b"own", b"in-a", b"in-b")
    assert b"gone" not in a and list(b) == [b"k"]
    with pytest.raises(RuntimeError):
        with db.write_batch() as batch:
            batch.put(b"never", b"v", keyspace=a)
            batch.put(b"never", b"v")
            raise RuntimeError("abort")
    assert b"never" not in a and b"never" not in db
    # A batch naming a keyspace dropped before it is written writes nothing at all.
    batch = db.write_batch()
    batch.put(b"late", b"v")
    batch.put(b"late", b"v", keyspace=a)
    batch.put(b"late", b"v", keyspace=b)
    assert db.drop_keyspace("b")
    db.keyspace("b")  # a namesake does not take the dropped keyspace's writes
    with pytest.raises(splitkv.InvalidArgumentError, match="dropped"):
        batch.write()
    assert b"late" not in db and b"late" not in a and list(db.keyspace("b")) == []
    with pytest.raises(splitkv.InvalidArgumentError, match="dropped"):
        db.write_batch().put(b"k", b"v", keyspace=b)


def test_drop_keyspace(db):
    ks = db.keyspace("ks")
    fill(ks, 100, b"v")
    db.flush()
    fill(ks, 50, b"w")  # in the memtable and in a table
    db[b"k001"] = b"own"
    assert db.drop_keyspace("ks") is True
    assert db.drop_keyspace("ks") is False
    assert db.keyspace_names() == []
    for call in (
        lambda: ks.get(b"k001"),
        lambda: ks[b"k001"],
        lambda: b"k001" in ks,
        lambda: ks.put(b"k", b"v"),
        lambda: ks.delete(b"k"),
        lambda: ks.delete_range(b"a", b"z"),
        lambda: ks.multi_get([b"k001"]),
        lambda: list(ks),
        lambda: ks.iterator(),
    ):
        with pytest.raises(splitkv.InvalidArgumentError, match="dropped"):
            call()
    again = db.keyspace("ks")
    assert list(again) == [] and again.get(b"k001") is None
    again[b"new"] = b"n"
    assert again[b"new"] == b"n"
    with pytest.raises(splitkv.InvalidArgumentError, match="dropped"):
        ks.get(b"new")  # the old handle does not read its namesake
    assert db[b"k001"] == b"own"
    assert ks.name == "ks"
    with pytest.raises(splitkv.InvalidArgumentError):
        db.keyspace("")
    with pytest.raises(splitkv.InvalidArgumentError):
        db.keyspace("x" * 257)


def test_snapshot_reads_of_a_keyspace(db):
    a, b = db.keyspace("a"), db.keyspace("b")
    fill(a, 50, b"before")
    fill(b, 50, b"before")
    db[b"k000"] = b"own"
    with db.snapshot() as snap:
        with db.write_batch() as batch:
            for i in range(50):
                batch.put(b"k%03d" % i, b"after", keyspace=a)
                batch.put(b"k%03d" % i, b"after", keyspace=b)
        a[b"new"] = b"x"
        b.delete_range(b"k000", b"k100")
        db.flush()
        db.compact_range()
        assert snap.get(b"k007", keyspace=a) == b"before7"
        assert snap.get(b"k007", keyspace=b) == b"before7"
        assert snap.get(b"new", keyspace=a) is None and snap.get(b"new", b"dflt", keyspace=a) == b"dflt"
        assert snap.get(b"k000") == b"own" and snap.get(b"k001") is None
        assert snap.multi_get([b"k000", b"new", b"k049"], keyspace=a) == [b"before0", None, b"before49"]
        assert list(snap.iterator(keyspace=b, include_key=False)) == [b"before%d" % i for i in range(50)]
        assert list(snap.iterator(keyspace=a, start=b"k045", reverse=True, include_value=False)) == [
            b"k049", b"k048", b"k047", b"k046", b"k045"
        ]
        assert list(snap) == [b"k000"]  # the dict protocol reads the database's own keys
        assert a[b"k007"] == b"after" and b.get(b"k007") is None
        late = db.keyspace("late")
        late[b"k"] = b"v"
        assert snap.get(b"k", keyspace=late) is None  # created after the snapshot
        db.drop_keyspace("a")
        with pytest.raises(splitkv.InvalidArgumentError, match="dropped"):
            snap.get(b"k007", keyspace=a)
    with pytest.raises(splitkv.ClosedError, match="released"):
        snap.get(b"k007", keyspace=b)


def test_iterators_in_a_keyspace(db):
    ks = db.keyspace("ks")
    keys = [b"a1", b"a2", b"a3", b"b1", b"b2", b"c", b"\xff", b"\xff\xff"]
    for key in keys:
        ks[key] = key.upper()
    db[b"a0"] = b"own"
    db.keyspace("z")[b"a4"] = b"other keyspace"
    db.flush()
    ks[b"b3"] = b"B3"  # one more in the memtable
    keys = sorted(keys + [b"b3"])
    assert list(ks) == keys
    assert list(ks.iterator(include_value=False, reverse=True)) == keys[::-1]
    assert list(ks.iterator(prefix=b"a")) == [(b"a1", b"A1"), (b"a2", b"A2"), (b"a3", b"A3")]
    assert list(ks.iterator(prefix=b"b", reverse=True, include_key=False)) == [b"B3", b"B2", b"B1"]
    assert list(ks.iterator(prefix=b"\xff", include_value=False)) == [b"\xff", b"\xff\xff"]
    assert list(ks.iterator(start=b"a2", stop=b"b2", include_value=False)) == [b"a2", b"a3", b"b1"]
    assert list(ks.iterator(start=b"a2", stop=b"b2", include_start=False, include_stop=True, include_value=False)) == [
        b"a3",
        b"b1",
        b"b2",
    ]
    assert list(ks.iterator(stop=b"a3", reverse=True, include_value=False)) == [b"a2", b"a1"]
    assert list(ks.iterator(start=b"c", include_value=False)) == [b"c", b"\xff", b"\xff\xff"]
    it = ks.iterator(start=b"a2", stop=b"c", include_value=False)
    it.seek(b"b")
    assert next(it) == b"b1"
    it.seek(b"zzz")
    assert list(it) == []
    it.seek_to_start()
    assert next(it) == b"a2"
    back = ks.iterator(reverse=True, include_value=False)
    back.seek(b"b0")
    assert list(back) == [b"a3", b"a2", b"a1"]
    early = ks.iterator(prefix=b"c")
    ks[b"c"] = b"changed"  # an iterator reads the view of its creation
    assert list(early) == [(b"c", b"C")]
