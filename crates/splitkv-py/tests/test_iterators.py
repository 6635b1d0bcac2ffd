"""Iterators against a dict model: both directions, every kind of bound, prefixes, item shapes,
seeks, and the read view an iterator holds."""

import random

import pytest

import splitkv


def fill(db, seed, n=600):
    """Writes, overwrites and deletes random keys across several flushes; returns the model."""
    rng = random.Random(seed)
    model = {}
    alphabet = [b"a", b"ab", b"b", b"\x00", b"\xff", b"m", b"z"]
    for step in range(n):
        key = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.2:
            db.delete(key)
            model.pop(key, None)
        else:
            value = bytes([step % 256]) * rng.choice([1, 10, 600, 3000])
            db.put(key, value)
            model[key] = value
        if step % 200 == 199:
            db.flush()
    return model


def expected(model, lower=None, upper=None, reverse=False):
    keys = sorted(k for k in model if (lower is None or k >= lower) and (upper is None or k < upper))
    return [(k, model[k]) for k in (reversed(keys) if reverse else keys)]


def test_full_scans_both_ways(db):
    model = fill(db, 1)
    assert list(db.iterator()) == expected(model)
    assert list(db.iterator(reverse=True)) == expected(model, reverse=True)
    assert list(db) == sorted(model)
    assert list(db.iterator(include_value=False, reverse=True)) == sorted(model, reverse=True)
    assert list(db.iterator(include_key=False)) == [v for _, v in expected(model)]
    with pytest.raises(ValueError):
        db.iterator(include_key=False, include_value=False)


@pytest.mark.parametrize("seed", range(3))
def test_random_bounds_against_the_model(db, seed):
    model = fill(db, seed)
    rng = random.Random(seed + 100)
    candidates = sorted(model) + [b"", b"a\x00", b"aa", b"n", b"\xff\xff\xff\xff\xff"]
    for _ in range(60):
        start = rng.choice(candidates + [None])
        stop = rng.choice(candidates + [None])
        include_start = rng.random() < 0.5
        include_stop = rng.random() < 0.5
        reverse = rng.random() < 0.5
        got = list(db.iterator(start=start, stop=stop, include_start=include_start, include_stop=include_stop,
                               reverse=reverse))
        want = [
            (k, v)
            for k, v in expected(model, reverse=reverse)
            if (start is None or k > start or (include_start and k == start))
            and (stop is None or k < stop or (include_stop and k == stop))
        ]
        assert got == want, (start, stop, include_start, include_stop, reverse)


@pytest.mark.parametrize("prefix", [b"a", b"ab", b"\xff", b"\xff\xff", b"", b"q"])
def test_prefix(db, prefix):
    model = fill(db, 7)
    want = [(k, v) for k, v in expected(model) if k.startswith(prefix)]
    assert list(db.iterator(prefix=prefix)) == want
    assert list(db.iterator(prefix=prefix, reverse=True)) == want[::-1]
    with pytest.raises(TypeError, match="prefix cannot be combined"):
        db.iterator(prefix=prefix, start=b"a")


def test_seek_both_ways(db):
    model = fill(db, 3)
    keys = sorted(model)
    it = db.iterator(include_value=False)
    for target in [b"", b"a", b"ab\x00", b"m", b"zzzzz", keys[len(keys) // 2]]:
        it.seek(target)
        assert list(it) == [k for k in keys if k >= target]
    rev = db.iterator(include_value=False, reverse=True)
    for target in [b"", b"a", b"ab\x00", b"m", b"zzzzz", keys[len(keys) // 2]]:
        rev.seek(target)
        assert list(rev) == [k for k in reversed(keys) if k <= target]
    bounded = db.iterator(start=b"b", stop=b"m", include_value=False)
    bounded.seek(b"a")  # clamped to the range
    assert list(bounded) == [k for k in keys if b"b" <= k < b"m"]
    bounded.seek_to_start()
    assert next(bounded) == min(k for k in keys if k >= b"b")


def test_partial_consumption_then_rewind(db):
    model = fill(db, 4)
    it = db.iterator()
    first = [next(it) for _ in range(5)]
    assert first == expected(model)[:5]
    it.seek_to_start()
    assert list(it) == expected(model)
    assert list(it) == []  # exhausted


def test_iterator_reads_the_state_of_its_creation(db):
    for i in range(300):
        db[b"%04d" % i] = b"old"
    it = db.iterator()
    assert next(it) == (b"0000", b"old")
    for i in range(300):
        db[b"%04d" % i] = b"new"
    db.delete(b"0150")
    db[b"9999"] = b"added"
    db.flush()
    assert list(it) == [(b"%04d" % i, b"old") for i in range(1, 300)]
    assert len(list(db.iterator())) == 300


def test_closed_iterator(db):
    db[b"k"] = b"v"
    with db.iterator() as it:
        pass
    with pytest.raises(splitkv.ClosedError):
        next(it)
    it.close()  # idempotent


def test_iterator_bounds_must_be_bytes(db):
    with pytest.raises(TypeError, match="start must be bytes, not str"):
        db.iterator(start="a")
    with pytest.raises(TypeError):
        db.iterator(prefix=3)
