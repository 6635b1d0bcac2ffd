//! An application's `tracing` subscriber receives the engine's events (target `splitkv`, with
//! the database's directory in a `db` field), from the calling thread and from background
//! threads alike. One test in this file: it installs the process's global subscriber.

mod common;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use common::{small_options, value_for};
use splitkv::fs::MemFileSystem;
use splitkv::{Db, IndexKind, Options, Result};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One received event: its target, level, message and other fields.
#[derive(Clone, Debug)]
struct Received {
    target: String,
    level: tracing::Level,
    message: String,
    fields: BTreeMap<String, String>,
}

/// Keeps every event it is given.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<Received>>>);

struct Fields<'a>(&'a mut Received);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.0.message = text;
        } else {
            self.0.fields.insert(field.name().to_string(), text);
        }
    }
}

impl Subscriber for Collector {
    fn enabled(&self, _metadata: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _span: &Id, _values: &Record<'_>) {}
    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let mut received = Received {
            target: meta.target().to_string(),
            level: *meta.level(),
            message: String::new(),
            fields: BTreeMap::new(),
        };
        event.record(&mut Fields(&mut received));
        if let Ok(mut all) = self.0.lock() {
            all.push(received);
        }
    }
    fn enter(&self, _span: &Id) {}
    fn exit(&self, _span: &Id) {}
}

#[test]
fn an_installed_subscriber_receives_the_engines_events() -> Result<()> {
    let collector = Collector::default();
    tracing::subscriber::set_global_default(collector.clone()).expect("the only subscriber of this test binary");
    let fs = MemFileSystem::new();
    let options = Options { fs: Arc::new(fs), background_gc: false, ..small_options(IndexKind::Lsm, 0) };
    let db = Db::open("/db", options)?;
    for round in 0..2u64 {
        for k in 0..100u64 {
            db.put(format!("k{k:03}"), value_for(round * 100 + k, 200))?;
        }
        // The flush runs on a background worker.
        db.flush()?;
    }
    db.compact_range(None, None)?;
    db.run_gc()?;
    drop(db);

    let events = collector.0.lock().map(|e| e.clone()).unwrap_or_default();
    let messages: Vec<&str> = events.iter().map(|e| e.message.as_str()).collect();
    for wanted in [
        "opening database",
        "replayed value log",
        "opened database",
        "flush finished",
        "compaction finished",
        "gc run finished",
        "closed database",
    ] {
        assert!(messages.contains(&wanted), "{wanted} not among {messages:?}");
    }
    assert!(events.iter().all(|e| e.target == "splitkv"), "{events:?}");
    assert!(events.iter().all(|e| e.fields.get("db").is_some_and(|d| d.contains("/db"))), "{events:?}");
    let flush = events.iter().find(|e| e.message == "flush finished").map(|e| e.fields.clone()).unwrap_or_default();
    assert_eq!(flush.get("entries").map(String::as_str), Some("100"), "{flush:?}");
    assert!(events.iter().all(|e| e.level != tracing::Level::ERROR), "{events:?}");
    Ok(())
}
