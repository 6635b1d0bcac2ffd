//! Command-line flags and the optional TOML file of engine options.
//!
//! Server settings are flags. Engine options come from `--config FILE` (a TOML table
//! `[engine]` whose keys are `splitkv::Options` field names) and are overridden by the flags
//! of the same name; anything not given keeps the engine's default.

use crate::cluster::{parse_node, parse_ranges, ClusterMap, Node};
use crate::durability::SyncPolicy;
use clap::Parser;
use serde::Deserialize;
use splitkv::{IndexKind, Options};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "splitkv-server", version, about = "The splitkv storage engine behind the Redis protocol")]
pub struct Args {
    /// Database directory (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Address to listen on; loopback only unless you mean otherwise.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Clients must AUTH with this password.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// When writes become durable: always (each write fsynced), group (one shared fsync before
    /// replies are sent), interval (every --sync-interval-ms, like appendfsync everysec).
    #[arg(long, value_enum, default_value = "interval")]
    pub sync: SyncPolicy,
    #[arg(long, default_value_t = 1000)]
    pub sync_interval_ms: u64,
    /// How often the background sweep deletes expired keys.
    #[arg(long, default_value_t = 100)]
    pub expire_sweep_ms: u64,
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: u64,
    /// Largest bulk string accepted in a request, bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub proto_max_bulk_len: usize,
    /// Most bytes one request may carry, bytes.
    #[arg(long, default_value_t = 256 << 20)]
    pub client_query_buffer_limit: usize,
    /// Engine options file (TOML, table `[engine]`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Engine: values of at least this many bytes go to the value log.
    #[arg(long)]
    pub value_threshold: Option<usize>,
    /// Engine: memtable size in bytes.
    #[arg(long)]
    pub write_buffer_size: Option<usize>,
    /// Engine: block cache size in bytes.
    #[arg(long)]
    pub block_cache_capacity: Option<usize>,
    /// Engine: value-log segment size in bytes.
    #[arg(long)]
    pub segment_size: Option<u64>,
    /// Engine: index kind, lsm or hash.
    #[arg(long)]
    pub index: Option<String>,
    /// Cluster mode: the slots this node serves (`0-5460`, ranges joined by `+`).
    #[arg(long)]
    pub cluster_slots: Option<String>,
    /// Cluster mode: this node's id (default: derived from its address).
    #[arg(long)]
    pub cluster_myid: Option<String>,
    /// Cluster mode: host:port this node is announced as (default: bind:port).
    #[arg(long)]
    pub cluster_announce: Option<String>,
    /// Cluster mode: the other nodes, `ID=HOST:PORT@SLOTS`, repeated or comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub cluster_node: Vec<String>,
}

/// The `[engine]` table of the TOML file.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    pub value_threshold: Option<usize>,
    pub write_buffer_size: Option<usize>,
    pub block_cache_capacity: Option<usize>,
    pub segment_size: Option<u64>,
    pub index: Option<String>,
    pub bloom_bits_per_key: Option<usize>,
    pub max_background_compactions: Option<usize>,
    pub background_gc: Option<bool>,
    pub gc_garbage_ratio: Option<f64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    engine: EngineFile,
}

fn parse_index(name: &str) -> Result<IndexKind, String> {
    match name {
        "lsm" => Ok(IndexKind::Lsm),
        "hash" => Ok(IndexKind::Hash { capacity: 1 << 20, shards: 4 }),
        other => Err(format!("unknown index kind {other:?} (lsm or hash)")),
    }
}

impl Args {
    /// The engine options: defaults, then the file, then flags.
    pub fn engine_options(&self) -> Result<Options, String> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
                toml::from_str::<ConfigFile>(&text).map_err(|e| format!("{}: {e}", path.display()))?.engine
            }
            None => EngineFile::default(),
        };
        let mut o = Options::default();
        macro_rules! set {
            ($field:ident) => {
                if let Some(v) = self.$field.clone().or(file.$field.clone()) {
                    o.$field = v;
                }
            };
        }
        set!(value_threshold);
        set!(write_buffer_size);
        set!(block_cache_capacity);
        set!(segment_size);
        if let Some(v) = file.bloom_bits_per_key {
            o.bloom_bits_per_key = v;
        }
        if let Some(v) = file.max_background_compactions {
            o.max_background_compactions = v;
        }
        if let Some(v) = file.background_gc {
            o.background_gc = v;
        }
        if let Some(v) = file.gc_garbage_ratio {
            o.gc_garbage_ratio = v;
        }
        if let Some(name) = self.index.as_deref().or(file.index.as_deref()) {
            o.index = parse_index(name)?;
        }
        Ok(o)
    }

    /// The cluster map when `--cluster-slots` is given.
    pub fn cluster_map(&self) -> Result<Option<ClusterMap>, String> {
        let Some(slots) = &self.cluster_slots else {
            if !self.cluster_node.is_empty() {
                return Err("--cluster-node needs --cluster-slots".into());
            }
            return Ok(None);
        };
        let announce = self.cluster_announce.clone().unwrap_or_else(|| format!("{}:{}", self.bind, self.port));
        let (host, port) = announce.rsplit_once(':').ok_or("--cluster-announce is HOST:PORT")?;
        let port: u16 = port.parse().map_err(|_| "bad port in --cluster-announce")?;
        // Node ids in Redis are 40 hex characters; derive a stable one from the address.
        let id = self.cluster_myid.clone().unwrap_or_else(|| {
            let seed = format!("{host}:{port}");
            let mut h: u64 = 0xcbf29ce484222325;
            let mut id = String::new();
            while id.len() < 40 {
                for b in seed.bytes() {
                    h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
                }
                id.push_str(&format!("{h:016x}"));
            }
            id.truncate(40);
            id
        });
        let mut nodes = vec![Node { id, host: host.to_string(), port, ranges: parse_ranges(slots)? }];
        for spec in &self.cluster_node {
            nodes.push(parse_node(spec)?);
        }
        ClusterMap::new(nodes, 0).map(Some)
    }
}
