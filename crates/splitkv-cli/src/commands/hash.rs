//! The hash index's table file (`HASHINDEX`) as `info`, `verify` and `dump` read it: opening it,
//! and how its slots, keys and figures are shown.
//!
//! The engine maps the table file read-write. `verify` does the same under the directory lock
//! ([`open_locked`]), where the engine's rule that nobody truncates a mapped file holds. `dump`
//! takes no lock and must also work on a copy or a read-only file, so it opens an in-memory copy
//! ([`open_copy`]): a file that another process replaces or shrinks meanwhile cannot fault a
//! mapping, and nothing on disk is opened for writing. `info` reads the table's figures from a
//! read-only open of the database, which makes such a copy too.

use std::path::Path;

use serde_json::{json, Value};
use splitkv::index::hash::slot::{Slot, SlotKey, SlotState, HEADER_LEN, SLOT_LEN};
use splitkv::index::hash::table::{Table, TableStats};

use super::os_fs;
use crate::format::ByteStyle;

/// Opens the table at `path` in place, walking every chain (corruption is an error). Only for
/// callers holding the directory lock.
pub fn open_locked(path: &Path) -> splitkv::Result<Table> {
    Table::open(os_fs().as_ref(), path)
}

/// Reads the table file at `path` into memory and opens the copy. Returns the bytes read
/// either way (a table that does not open can still be listed slot by slot); an error only if
/// the file cannot be read at all.
pub fn open_copy(path: &Path) -> splitkv::Result<(Vec<u8>, splitkv::Result<Table>)> {
    let bytes = os_fs().read_all(path)?;
    // The copy has the original's path, so errors name the file the user gave.
    let table = Table::open_copy(path, &bytes);
    Ok((bytes, table))
}

/// Byte offset of slot `index` in the table file.
pub fn slot_offset(index: u64) -> u64 {
    (HEADER_LEN as u64).saturating_add(index.saturating_mul(SLOT_LEN as u64))
}

/// The bucket whose chain slot `index` belongs to: a normal-region slot is its bucket's head;
/// a collision slot belongs to the bucket its key hashes to.
pub fn bucket_of(index: u64, slot: &Slot, buckets: u64) -> u64 {
    if index < buckets {
        index
    } else {
        slot.key.hash() % buckets.max(1)
    }
}

/// `value`, `tombstone` or `empty`.
pub fn state_name(state: SlotState) -> &'static str {
    match state {
        SlotState::Empty => "empty",
        SlotState::Value => "value",
        SlotState::Tombstone => "tombstone",
    }
}

/// A slot's key for people: the key, or for a long key (whose slot holds only a prefix and a
/// hash; the whole key is in the log record) the prefix, marked as such, and the hash.
pub fn show_key(key: &SlotKey, style: ByteStyle) -> String {
    match (key.inline(), key.long_prefix()) {
        (Some(k), _) => style.show(k),
        (None, Some(prefix)) => format!("{}... (long key, hash {:016x})", style.show(prefix), key.hash()),
        (None, None) => String::from("<no key>"),
    }
}

/// Adds a slot's key to a JSON row: `key` for an inline key; `key_prefix`, `key_hash` and
/// `long_key: true` for a long one.
pub fn add_key_json(row: &mut Value, key: &SlotKey, style: ByteStyle) {
    match (key.inline(), key.long_prefix()) {
        (Some(k), _) => row["key"] = json!(style.show(k)),
        (None, prefix) => {
            row["long_key"] = json!(true);
            row["key_prefix"] = json!(prefix.map(|p| style.show(p)));
            row["key_hash"] = json!(format!("{:016x}", key.hash()));
        }
    }
}

/// Keys per bucket (values and tombstones).
pub fn load_factor(stats: &TableStats) -> f64 {
    if stats.buckets == 0 {
        0.0
    } else {
        stats.entries as f64 / stats.buckets as f64
    }
}

/// The table's figures as JSON fields.
pub fn stats_json(stats: &TableStats) -> Value {
    json!({
        "buckets": stats.buckets,
        "entries": stats.entries,
        "tombstones": stats.tombstones,
        "collision_used": stats.collision_used,
        "file_bytes": stats.file_bytes,
        "load_factor": load_factor(stats),
    })
}
