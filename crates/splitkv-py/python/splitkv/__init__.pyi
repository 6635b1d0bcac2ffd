"""Type stubs of the splitkv package (the classes live in the extension ``splitkv._splitkv``)."""

import os
from types import TracebackType
from typing import Any, Dict, Iterable, List, Optional, Tuple, Type, TypeVar, Union, overload

_Bytes = Union[bytes, bytearray]
_T = TypeVar("_T")

__version__: str
OPTION_NAMES: List[str]
"""Every keyword argument ``DB()`` accepts."""

class Error(Exception):
    """Base class of every error the storage engine reports."""

class IoError(Error):
    """An operating-system I/O error while reading or writing the database."""

class CorruptionError(Error):
    """Stored bytes failed validation; the message names the file and offset."""

class PoisonedError(Error):
    """An earlier durability failure poisoned the write path; reads still work."""

class InvalidArgumentError(Error):
    """The engine refused an argument or option (a missing database, an existing one)."""

class LockedError(Error):
    """The database directory is held open by another process or handle."""

class NoSpaceError(Error):
    """The value log is over its space budget and GC cannot bring it back under."""

class ClosedError(Error):
    """The database, or the snapshot or iterator used, is closed."""

class Iterator:
    """Items of a key range: ``(key, value)`` tuples, or keys or values alone."""

    def __iter__(self) -> "Iterator": ...
    def __next__(self) -> Any: ...
    def seek(self, target: _Bytes) -> None:
        """Next item: the first key >= target (reverse: the last key <= target), in range."""
    def seek_to_start(self) -> None:
        """Rewinds to the beginning of the range (the end, if reversed)."""
    def close(self) -> None:
        """Releases the iterator's read view; later steps raise ClosedError."""
    def __enter__(self) -> "Iterator": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class WriteBatch:
    """Puts and deletes applied atomically by write() or at the end of a ``with`` block."""

    def put(self, key: _Bytes, value: _Bytes, *, keyspace: Optional["Keyspace"] = None) -> None:
        """Adds a put (in ``keyspace``; by default the database's own keys)."""
    def delete(self, key: _Bytes, *, keyspace: Optional["Keyspace"] = None) -> None: ...
    def delete_range(
        self, start: _Bytes, end: _Bytes, *, keyspace: Optional["Keyspace"] = None
    ) -> None:
        """Adds a delete of every key in [start, end)."""
    def clear(self) -> None: ...
    def write(self) -> None:
        """Applies the batch atomically (durably if made with sync=True) and empties it."""
    def __len__(self) -> int: ...
    def __enter__(self) -> "WriteBatch": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        """Writes the batch, or discards it if an exception is leaving the block."""

class Snapshot:
    """A consistent read view of every keyspace; release() or the end of a ``with`` block frees
    it. ``keyspace=`` reads a keyspace instead of the database's own keys."""

    @overload
    def get(self, key: _Bytes, *, keyspace: Optional["Keyspace"] = None) -> Optional[bytes]: ...
    @overload
    def get(
        self,
        key: _Bytes,
        default: _T,
        *,
        keyspace: Optional["Keyspace"] = None,
        fill_cache: bool = True,
        verify_checksums: bool = False,
    ) -> Union[bytes, _T]: ...
    def multi_get(
        self, keys: Iterable[_Bytes], *, keyspace: Optional["Keyspace"] = None
    ) -> List[Optional[bytes]]: ...
    def __getitem__(self, key: _Bytes) -> bytes: ...
    def __contains__(self, key: _Bytes) -> bool: ...
    def __iter__(self) -> Iterator: ...
    def iterator(
        self,
        *,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
        fill_cache: bool = True,
        keyspace: Optional["Keyspace"] = None,
    ) -> Iterator: ...
    def release(self) -> None: ...
    def __enter__(self) -> "Snapshot": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Keyspace:
    """A named keyspace of a DB (made by ``DB.keyspace(name)``): the DB's data methods over keys
    of its own. After ``DB.drop_keyspace(name)`` every call raises InvalidArgumentError."""

    @property
    def name(self) -> str: ...
    @overload
    def get(self, key: _Bytes) -> Optional[bytes]: ...
    @overload
    def get(
        self, key: _Bytes, default: _T, *, fill_cache: bool = True, verify_checksums: bool = False
    ) -> Union[bytes, _T]: ...
    def put(self, key: _Bytes, value: _Bytes, *, sync: bool = False) -> None: ...
    def delete(self, key: _Bytes, *, sync: bool = False) -> None: ...
    def delete_range(self, start: _Bytes, end: _Bytes, *, sync: bool = False) -> None:
        """Removes every key of the keyspace in [start, end)."""
    def multi_get(self, keys: Iterable[_Bytes]) -> List[Optional[bytes]]:
        """The values at one point in time (read one by one, not concurrently as DB's are)."""
    def __getitem__(self, key: _Bytes) -> bytes: ...
    def __setitem__(self, key: _Bytes, value: _Bytes) -> None: ...
    def __delitem__(self, key: _Bytes) -> None: ...
    def __contains__(self, key: _Bytes) -> bool: ...
    def __iter__(self) -> Iterator: ...
    def iterator(
        self,
        *,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
        fill_cache: bool = True,
    ) -> Iterator:
        """As DB.iterator(), over the keyspace's keys."""

class DB:
    """An open splitkv database (keys and values are bytes).

    Keyword options (defaults are the engine's; see OPTION_NAMES): create_if_missing,
    error_if_exists, value_threshold (None: never separate values), write_buffer_size,
    segment_size, vlog_buffer_size, block_size, block_restart_interval, compression
    ("none" | "lz4" | "zstd"), index_block_kind ("binary" | "learned" | "adaptive"),
    bloom_bits_per_key, block_cache_capacity, max_open_files,
    num_levels, level0_file_num_compaction_trigger, level0_slowdown_writes_trigger,
    level0_stop_writes_trigger, max_bytes_for_level_base, max_bytes_for_level_multiplier,
    target_file_size, max_background_compactions, compaction_policy ("score" | "time_slice",
    with time_slice_ms, time_slice_dynamic, time_slice_drain_percent), gc_policy ("oldest" |
    "greedy" | "cost_benefit"), background_gc, gc_garbage_ratio, gc_space_budget,
    gc_space_amplification, gc_space_trigger, gc_punch_holes, gc_logical_space_factor,
    gc_rate_limit, gc_in_compaction, gc_compact_in_place, index ("lsm" | "hash", with hash_capacity, hash_shards), paranoid_checks,
    prefetch_threads. A misspelt keyword raises TypeError.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], **options: Any) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def approximate_len(self) -> int:
        """Estimated number of keys (high by overwrites and deletes not yet compacted)."""
    @overload
    def get(self, key: _Bytes) -> Optional[bytes]: ...
    @overload
    def get(
        self, key: _Bytes, default: _T, *, fill_cache: bool = True, verify_checksums: bool = False
    ) -> Union[bytes, _T]: ...
    def put(self, key: _Bytes, value: _Bytes, *, sync: bool = False) -> None: ...
    def delete(self, key: _Bytes, *, sync: bool = False) -> None: ...
    def delete_range(self, start: _Bytes, end: _Bytes, *, sync: bool = False) -> None:
        """Removes every key in [start, end) (one range tombstone with the LSM index)."""
    def multi_get(self, keys: Iterable[_Bytes]) -> List[Optional[bytes]]: ...
    def __getitem__(self, key: _Bytes) -> bytes: ...
    def __setitem__(self, key: _Bytes, value: _Bytes) -> None: ...
    def __delitem__(self, key: _Bytes) -> None:
        """Like delete(): no KeyError for an absent key."""
    def __contains__(self, key: _Bytes) -> bool: ...
    def __iter__(self) -> Iterator:
        """Every key, in order."""
    def iterator(
        self,
        *,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
        fill_cache: bool = True,
    ) -> Iterator:
        """Items of [start, stop) (or of a prefix), as of now; reverse=True from the end."""
    def keyspace(self, name: str) -> Keyspace:
        """The keyspace called name, created if missing (names: 1 to 256 UTF-8 bytes)."""
    def drop_keyspace(self, name: str) -> bool:
        """Drops a keyspace and its keys in one atomic write; returns whether it existed."""
    def keyspace_names(self) -> List[str]: ...
    def write_batch(self, *, sync: bool = False) -> WriteBatch: ...
    def snapshot(self) -> Snapshot: ...
    def flush(self) -> None: ...
    def compact_range(self, start: Optional[_Bytes] = None, stop: Optional[_Bytes] = None) -> None:
        """Compacts keys from start to stop, both inclusive (None: unbounded)."""
    def run_gc(self) -> Dict[str, Any]:
        """Collects value-log garbage now; returns what the last step did."""
    def stats(self) -> Dict[str, Any]: ...
    def property(self, name: str) -> Optional[str]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "DB": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
