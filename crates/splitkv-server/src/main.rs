//! `splitkv-server`: one splitkv database served over the Redis protocol (RESP2 and RESP3),
//! optionally as one node of a Redis Cluster-style slot map.
//!
//! Start-up: parse flags, open the database (checking the server's key-format version), bind,
//! start the background tasks (expiry sweep, interval or group syncer), serve until SIGTERM or
//! SIGINT, then shut down gracefully (see `server`). Exit status 0 after a clean shutdown,
//! 1 when the database cannot be opened or the port cannot be bound.

#![deny(unsafe_code)]

mod cluster;
mod commands;
mod config;
mod durability;
mod keys;
mod resp;
mod server;
mod store;

use clap::Parser;
use commands::keyspace::Cursors;
use durability::{GroupSyncer, SyncPolicy};
use resp::Limits;
use server::{Server, ServerStats};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::Store;

fn main() {
    let args = config::Args::parse();
    if let Err(e) = run(args) {
        eprintln!("splitkv-server: {e}");
        std::process::exit(1);
    }
}

fn run(args: config::Args) -> Result<(), String> {
    let options = args.engine_options()?;
    let cluster = args.cluster_map()?;
    let store = Arc::new(Store::open(&args.dir, options, args.sync == SyncPolicy::Always)?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
            .await
            .map_err(|e| format!("cannot listen on {}:{}: {e}", args.bind, args.port))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let syncer = (args.sync == SyncPolicy::Group).then(|| GroupSyncer::start(Arc::clone(&store)));
        if args.sync == SyncPolicy::Interval {
            tokio::spawn(durability::interval_sync(
                Arc::clone(&store),
                Duration::from_millis(args.sync_interval_ms.max(1)),
            ));
        }
        tokio::spawn(server::sweep_expired(Arc::clone(&store), Duration::from_millis(args.expire_sweep_ms.max(1))));
        let server = Arc::new(Server {
            store: Arc::clone(&store),
            requirepass: args.requirepass.clone(),
            cluster,
            limits: Limits {
                max_bulk: args.proto_max_bulk_len,
                max_request: args.client_query_buffer_limit,
                ..Limits::default()
            },
            policy: args.sync,
            syncer,
            stats: ServerStats::default(),
            cursors: parking_lot::Mutex::new(Cursors::new()),
            started: Instant::now(),
            port,
            bind: args.bind.clone(),
            dir_display: args.dir.display().to_string(),
            maxclients: args.maxclients,
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stop_signal = shutdown_signal()?;
        tokio::spawn(async move {
            stop_signal.await;
            let _ = stop_tx.send(true);
        });
        // The line tests and scripts wait for; printed once the port accepts connections.
        println!("splitkv-server ready on {}:{port}", args.bind);
        server::serve(server, listener, stop_rx).await;
        Ok::<(), String>(())
    })?;
    runtime.shutdown_timeout(Duration::from_secs(5));
    // Everything acknowledged is made durable, then the memtable is flushed so the next
    // start has no log to replay.
    store.sync().map_err(|e| format!("final sync failed: {e}"))?;
    store.db.flush().map_err(|e| format!("final flush failed: {e}"))?;
    // A background thread (the group syncer) may still hold the store; then the sync above is
    // what counts and the database closes when the process exits.
    if let Ok(store) = Arc::try_unwrap(store) {
        store.db.close().map_err(|e| format!("close failed: {e}"))?;
    }
    eprintln!("splitkv-server: shut down cleanly");
    Ok(())
}

/// Installs the SIGTERM and SIGINT handlers now and returns the wait for either. Installed before
/// the ready line: a signal sent the moment the server reports ready must already shut it down
/// cleanly, where a handler installed later by the waiting task left it to the default action,
/// which killed the process before the final sync and flush.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let handler = |kind: SignalKind, name: &str| signal(kind).map_err(|e| format!("cannot handle {name}: {e}"));
    let mut term = handler(SignalKind::terminate(), "SIGTERM")?;
    let mut int = handler(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
