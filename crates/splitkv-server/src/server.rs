//! The network side: the listener, one task per connection, the background expiry sweep,
//! and graceful shutdown.
//!
//! A connection reads into one buffer, runs every complete request in it (a pipeline) and
//! sends the replies together, flushing early only when they pile up past `REPLY_FLUSH`, so
//! a pipeline of N commands costs one read and one write. Memory per connection is the
//! request limits of [`Limits`] plus the replies of one read's worth of requests.
//!
//! Shutdown (SIGTERM or SIGINT): stop accepting, tell every connection to finish the requests
//! it has read and close, wait for them, then fsync the log and flush the memtable so nothing
//! acknowledged is lost and the next start replays nothing.

use crate::cluster::ClusterMap;
use crate::commands::{execute, keyspace::Cursors, ConnState};
use crate::durability::{GroupSyncer, SyncPolicy};
use crate::resp::{encode, parse_request, Limits, Parsed, Reply};
use crate::store::{now_ms, Store};
use bytes::BytesMut;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Replies are written out once this many bytes are waiting, even mid-pipeline.
const REPLY_FLUSH: usize = 64 << 10;
/// Keys the expiry sweep deletes per pass; more passes follow at once while there is work.
const SWEEP_BATCH: usize = 500;

#[derive(Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    pub connected: AtomicU64,
    pub commands: AtomicU64,
}

/// Everything connections share.
pub struct Server {
    pub store: Arc<Store>,
    pub requirepass: Option<String>,
    pub cluster: Option<ClusterMap>,
    pub limits: Limits,
    pub policy: SyncPolicy,
    pub syncer: Option<Arc<GroupSyncer>>,
    pub stats: ServerStats,
    pub cursors: Mutex<Cursors>,
    pub started: Instant,
    pub port: u16,
    pub bind: String,
    pub dir_display: String,
    pub maxclients: u64,
}

/// Accepts connections until `shutdown` fires, then waits for the connections to finish.
pub async fn serve(server: Arc<Server>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let mut tasks = tokio::task::JoinSet::new();
    let mut next_id = 1u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                server.stats.connections.fetch_add(1, Ordering::Relaxed);
                let id = next_id;
                next_id += 1;
                tasks.spawn(connection(Arc::clone(&server), stream, id, shutdown.clone()));
            }
            _ = shutdown.changed() => break,
            // Reap finished connections so the set does not grow with every client ever seen.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

async fn connection(server: Arc<Server>, mut stream: TcpStream, id: u64, mut shutdown: watch::Receiver<bool>) {
    let connected = server.stats.connected.fetch_add(1, Ordering::Relaxed) + 1;
    if connected > server.maxclients {
        let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
        server.stats.connected.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let mut conn = ConnState::new(id, server.requirepass.is_none());
    let mut input = BytesMut::with_capacity(16 << 10);
    let mut output = BytesMut::with_capacity(16 << 10);
    'conn: loop {
        // Run every complete request already read.
        loop {
            let args = match parse_request(&mut input, &server.limits) {
                Ok(Parsed::Request(args)) => args,
                Ok(Parsed::Incomplete) => break,
                Err(e) => {
                    // As Redis: answer the protocol error, then close; other clients are unaffected.
                    encode(&Reply::err(format!("ERR {}", e.0)), conn.proto, &mut output);
                    let _ = flush(&server, &mut conn, &mut stream, &mut output).await;
                    break 'conn;
                }
            };
            let reply = if server.policy == SyncPolicy::Always {
                // Each write waits for its own fsync: let the runtime move other connections
                // to another thread meanwhile, so their writes join the engine's group commit.
                tokio::task::block_in_place(|| execute(&server, &mut conn, &args))
            } else {
                execute(&server, &mut conn, &args)
            };
            encode(&reply, conn.proto, &mut output);
            if conn.quit {
                let _ = flush(&server, &mut conn, &mut stream, &mut output).await;
                break 'conn;
            }
            if output.len() >= REPLY_FLUSH && !flush(&server, &mut conn, &mut stream, &mut output).await {
                break 'conn;
            }
        }
        if !flush(&server, &mut conn, &mut stream, &mut output).await {
            break;
        }
        if input.capacity() - input.len() < 4096 {
            input.reserve(16 << 10);
        }
        tokio::select! {
            read = stream.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = shutdown.changed() => break,
        }
    }
    server.stats.connected.fetch_sub(1, Ordering::Relaxed);
}

/// Sends the pending replies, after the group fsync when the `group` policy needs one.
/// Returns false when the connection must close.
async fn flush(server: &Server, conn: &mut ConnState, stream: &mut TcpStream, output: &mut BytesMut) -> bool {
    if output.is_empty() {
        return true;
    }
    if conn.wrote {
        conn.wrote = false;
        if let Some(syncer) = &server.syncer {
            if !syncer.sync().await {
                return false;
            }
        }
    }
    let ok = stream.write_all(output).await.is_ok();
    output.clear();
    ok
}

/// Deletes expired keys in the background, so keys nobody reads again still go away.
pub async fn sweep_expired(store: Arc<Store>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        loop {
            let store2 = Arc::clone(&store);
            let done = tokio::task::spawn_blocking(move || store2.sweep_expired(now_ms(), SWEEP_BATCH)).await;
            match done {
                Ok(Ok(n)) if n == SWEEP_BATCH => continue,
                _ => break,
            }
        }
    }
}
