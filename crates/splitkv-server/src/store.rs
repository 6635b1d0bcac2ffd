//! The typed keyspace over one [`splitkv::Db`]: metadata reads, key locks, atomic commits,
//! deletion of a key with all its records, and expiry (lazy and swept).
//!
//! Concurrency: reads take no lock (one engine read is atomic; multi-record reads use a
//! snapshot). Every command that writes holds the locks of all its keys — striped mutexes,
//! taken in stripe order so two commands never wait on each other in a cycle — across its
//! read-modify-write and the single `WriteBatch` that commits it. That is what makes `INCR`,
//! `HSET`'s field count and `MSET` atomic without any transaction support in the engine, while
//! writes to different keys still reach the engine concurrently and share its group commit.
//! Locks are `parking_lot` mutexes held only on the calling thread, never across an `.await`.

use crate::keys::{self, Kind, Meta};
use crate::resp::Reply;
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use splitkv::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

const LOCK_STRIPES: usize = 1024;

/// A command's failure as the reply the client gets.
pub type CmdResult = Result<Reply, Reply>;

impl From<splitkv::Error> for Reply {
    fn from(e: splitkv::Error) -> Reply {
        Reply::err(format!("ERR storage: {e}"))
    }
}

pub fn wrong_type() -> Reply {
    Reply::err("WRONGTYPE Operation against a key holding the wrong kind of value")
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The database and what every command shares.
pub struct Store {
    pub db: Db,
    locks: Vec<Mutex<()>>,
    write_opts: WriteOptions,
    /// Set by every commit, cleared by the interval syncer: an idle server does not fsync.
    pub dirty: AtomicBool,
    pub expired_keys: AtomicU64,
}

impl Store {
    /// Opens the database and checks (or, on an empty one, writes) the format version.
    pub fn open(dir: &Path, options: Options, sync_every_write: bool) -> Result<Store, String> {
        let db = Db::open(dir, options).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
        match db.get(keys::FORMAT_KEY).map_err(|e| e.to_string())? {
            Some(v) if v.as_ref() == keys::FORMAT_VERSION.to_be_bytes() => {}
            Some(v) => {
                return Err(format!(
                    "{} holds server data of format {v:?}; this build reads version {}",
                    dir.display(),
                    keys::FORMAT_VERSION
                ))
            }
            None => {
                if db.range::<&[u8], _>(..).map_err(|e| e.to_string())?.next().is_some() {
                    return Err(format!("{} holds data not written by splitkv-server", dir.display()));
                }
                db.write(&WriteOptions { sync: true }, {
                    let mut b = WriteBatch::new();
                    b.put(keys::FORMAT_KEY, keys::FORMAT_VERSION.to_be_bytes());
                    b
                })
                .map_err(|e| e.to_string())?;
            }
        }
        Ok(Store {
            db,
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            write_opts: WriteOptions { sync: sync_every_write },
            dirty: AtomicBool::new(false),
            expired_keys: AtomicU64::new(0),
        })
    }

    fn stripe(key: &[u8]) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        (h.finish() as usize) % LOCK_STRIPES
    }

    /// Locks every key's stripe, in stripe order.
    pub fn lock<'a, I: IntoIterator<Item = &'a [u8]>>(&self, keys: I) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = keys.into_iter().map(Self::stripe).collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes.into_iter().map(|s| self.locks[s].lock()).collect()
    }

    pub fn commit(&self, batch: WriteBatch) -> Result<(), Reply> {
        if batch.is_empty() {
            return Ok(());
        }
        self.db.write(&self.write_opts, batch)?;
        self.dirty.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Makes every acknowledged write durable (one fsync of the log).
    pub fn sync(&self) -> splitkv::Result<()> {
        self.db.write(&WriteOptions { sync: true }, WriteBatch::new())
    }

    /// The metadata of `key`, expired or not.
    pub fn raw_meta(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Meta>, Reply> {
        match self.db.get_opt(opts, keys::meta_key(key))? {
            None => Ok(None),
            Some(raw) => {
                Meta::decode(raw).map(Some).ok_or_else(|| Reply::err("ERR unreadable key metadata (newer format?)"))
            }
        }
    }

    /// The metadata of a live key. An expired one reads as absent and is queued in `expired`
    /// for deletion once the caller holds no lock (lazy expiry).
    pub fn meta(
        &self,
        opts: &ReadOptions,
        key: &[u8],
        now: u64,
        expired: &mut Vec<Bytes>,
    ) -> Result<Option<Meta>, Reply> {
        match self.raw_meta(opts, key)? {
            Some(m) if m.is_expired(now) => {
                expired.push(Bytes::copy_from_slice(key));
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// For a command that holds `key`'s lock and is about to write it: the live metadata; an
    /// expired key's records are deleted in `batch` and it reads as absent.
    pub fn meta_for_write(&self, key: &[u8], now: u64, batch: &mut WriteBatch) -> Result<Option<Meta>, Reply> {
        match self.raw_meta(&ReadOptions::default(), key)? {
            Some(m) if m.is_expired(now) => {
                self.delete_records(batch, key, &m)?;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// Like [`Store::meta_for_write`], and fails with WRONGTYPE unless the key is `kind`.
    pub fn typed_for_write(
        &self,
        key: &[u8],
        kind: Kind,
        now: u64,
        batch: &mut WriteBatch,
    ) -> Result<Option<Meta>, Reply> {
        match self.meta_for_write(key, now, batch)? {
            Some(m) if m.kind != kind => Err(wrong_type()),
            other => Ok(other),
        }
    }

    /// Adds to `batch` the deletion of `key`: its metadata, expiry entry and every field or
    /// member record.
    pub fn delete_records(&self, batch: &mut WriteBatch, key: &[u8], meta: &Meta) -> Result<(), Reply> {
        batch.delete(keys::meta_key(key));
        if meta.expire_at != 0 {
            batch.delete(keys::expiry_key(meta.expire_at, key));
        }
        let tags: &[u8] = match meta.kind {
            Kind::String => &[],
            Kind::Hash => &[keys::HASH_FIELD],
            Kind::ZSet => &[keys::ZSET_MEMBER, keys::ZSET_SCORE],
        };
        for &tag in tags {
            for item in self
                .prefix_iter(&ReadOptions { keys_only: true, ..ReadOptions::default() }, &keys::sub_prefix(tag, key))?
            {
                batch.delete(item?.0);
            }
        }
        Ok(())
    }

    /// Every record whose key starts with `prefix`.
    pub fn prefix_iter(&self, opts: &ReadOptions, prefix: &[u8]) -> Result<splitkv::RangeIter, Reply> {
        let end = keys::prefix_end(prefix);
        Ok(if end.is_empty() {
            self.db.range_opt(opts.clone(), prefix.to_vec()..)?
        } else {
            self.db.range_opt(opts.clone(), prefix.to_vec()..end)?
        })
    }

    /// Writes `meta` for `key`, moving its expiry entry from `old_expire` to `meta.expire_at`.
    pub fn put_meta(&self, batch: &mut WriteBatch, key: &[u8], meta: &Meta, old_expire: u64) {
        if old_expire != meta.expire_at {
            if old_expire != 0 {
                batch.delete(keys::expiry_key(old_expire, key));
            }
            if meta.expire_at != 0 {
                batch.put(keys::expiry_key(meta.expire_at, key), b"");
            }
        }
        batch.put(keys::meta_key(key), meta.encode());
    }

    /// Deletes `key` if it is (still) expired at `now`. Takes the key's lock: callers must
    /// hold none.
    pub fn expire_if_due(&self, key: &[u8], now: u64) -> Result<bool, Reply> {
        let _guard = self.lock([key]);
        match self.raw_meta(&ReadOptions::default(), key)? {
            Some(m) if m.is_expired(now) => {
                let mut batch = WriteBatch::new();
                self.delete_records(&mut batch, key, &m)?;
                self.commit(batch)?;
                self.expired_keys.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// One pass of the background sweep: deletes up to `limit` keys whose expiry is due and
    /// drops expiry entries left behind by keys that changed. Returns how many entries it read.
    pub fn sweep_expired(&self, now: u64, limit: usize) -> Result<usize, Reply> {
        let start = vec![keys::EXPIRY];
        let end = keys::expiry_key(now + 1, b"");
        let due: Vec<Bytes> = self
            .db
            .range_opt(ReadOptions { keys_only: true, ..ReadOptions::default() }, start..end)?
            .take(limit)
            .map(|r| r.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        for entry in &due {
            let Some((at, key)) = keys::split_expiry_key(entry) else { continue };
            if !self.expire_if_due(key, now)? {
                // The key was deleted, persisted or given a later expiry without this entry
                // being removed in the same batch (it always is; this only guards a crash
                // between format versions). Drop the stale entry under the key's lock.
                let _guard = self.lock([key]);
                let still = self.raw_meta(&ReadOptions::default(), key)?.is_some_and(|m| m.expire_at == at);
                if !still {
                    let mut batch = WriteBatch::new();
                    batch.delete(entry);
                    self.commit(batch)?;
                }
            }
        }
        Ok(due.len())
    }
}
