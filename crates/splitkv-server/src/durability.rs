//! When acknowledged writes become durable: the `--sync` policy.
//!
//! - `always`: every write command is its own synced `WriteBatch`; concurrent connections
//!   share fsyncs through the engine's group commit.
//! - `group`: writes go to the log unsynced; before a connection sends the replies of a
//!   pipeline that wrote anything, it waits for one shared fsync that covers every connection
//!   waiting at that moment (Redis's `appendfsync always`, which fsyncs once per event-loop turn).
//!   A reply is never sent before its write is durable.
//! - `interval`: a timer fsyncs every `--sync-interval-ms` if anything was written (Redis's
//!   `appendfsync everysec`): a crash loses at most about one interval of acknowledged writes.
//!
//! The group syncer is one OS thread, so an fsync never occupies a runtime worker; waiters are
//! woken through a `watch` channel carrying the highest request number made durable.

use crate::store::Store;
use clap::ValueEnum;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncPolicy {
    Always,
    Group,
    Interval,
}

impl SyncPolicy {
    /// The `appendfsync` value a Redis tool would expect for this policy.
    pub fn appendfsync(self) -> &'static str {
        match self {
            SyncPolicy::Always | SyncPolicy::Group => "always",
            SyncPolicy::Interval => "everysec",
        }
    }
}

/// Result of a group sync as seen by waiters: `done` request number, or a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Synced {
    Upto(u64),
    Failed,
}

/// Shared fsyncs for the `group` policy.
pub struct GroupSyncer {
    requested: Mutex<u64>,
    wake: Condvar,
    done: watch::Sender<Synced>,
}

impl GroupSyncer {
    /// Starts the syncer thread, which lives as long as the process.
    pub fn start(store: Arc<Store>) -> Arc<GroupSyncer> {
        let (done, _) = watch::channel(Synced::Upto(0));
        let syncer = Arc::new(GroupSyncer { requested: Mutex::new(0), wake: Condvar::new(), done });
        let worker = Arc::clone(&syncer);
        std::thread::Builder::new()
            .name("group-sync".into())
            .spawn(move || worker.run(&store))
            .expect("spawning the group-sync thread");
        syncer
    }

    fn run(&self, store: &Store) {
        let mut synced = 0;
        loop {
            let target = {
                let mut requested = self.requested.lock();
                while *requested == synced {
                    self.wake.wait(&mut requested);
                }
                *requested
            };
            let result = store.sync();
            synced = target;
            // A failed fsync poisons the engine's write path; every waiter learns of it and
            // closes its connection rather than acknowledge writes that may be lost.
            let _ = self.done.send(if result.is_ok() { Synced::Upto(target) } else { Synced::Failed });
        }
    }

    /// Waits until everything written before the call is durable; `false` if the fsync failed.
    pub async fn sync(&self) -> bool {
        let mut rx = self.done.subscribe();
        let ticket = {
            let mut requested = self.requested.lock();
            *requested += 1;
            *requested
        };
        self.wake.notify_one();
        let ok = rx.wait_for(|s| matches!(s, Synced::Failed) || matches!(s, Synced::Upto(n) if *n >= ticket)).await;
        matches!(ok.as_deref(), Ok(Synced::Upto(_)))
    }
}

/// The `interval` policy's timer task.
pub async fn interval_sync(store: Arc<Store>, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if store.dirty.swap(false, Ordering::Relaxed) {
            let store = Arc::clone(&store);
            let _ = tokio::task::spawn_blocking(move || store.sync()).await;
        }
    }
}
