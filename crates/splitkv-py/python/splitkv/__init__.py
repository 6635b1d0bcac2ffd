"""splitkv: an embedded, persistent, ordered key-value store (an LSM-tree of keys over a value
log), with plyvel/rocksdict-style access from Python.

    import splitkv

    with splitkv.DB("/tmp/example-db") as db:
        db[b"user:1"] = b"alice"
        with db.write_batch(sync=True) as batch:
            batch.put(b"user:2", b"bob")
            batch.delete(b"user:1")
        for key, value in db.iterator(prefix=b"user:"):
            print(key, value)

``db.keyspace(name)`` returns a named keyspace (a column family) with the same data methods.
Keys and values are bytes. Every engine error is a ``splitkv.Error``; the GIL is released
while the engine works, so threads may share one ``DB``.
"""

from ._splitkv import (
    DB,
    OPTION_NAMES,
    ClosedError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    IoError,
    Iterator,
    Keyspace,
    LockedError,
    NoSpaceError,
    PoisonedError,
    Snapshot,
    WriteBatch,
    __version__,
)

__all__ = [
    "DB",
    "OPTION_NAMES",
    "ClosedError",
    "CorruptionError",
    "Error",
    "InvalidArgumentError",
    "IoError",
    "Iterator",
    "Keyspace",
    "LockedError",
    "NoSpaceError",
    "PoisonedError",
    "Snapshot",
    "WriteBatch",
    "__version__",
]
