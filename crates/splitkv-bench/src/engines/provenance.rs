//! How the peer engine in this binary was built and linked, for the benchmark header, and the
//! refusal to benchmark a handicapped peer.
//!
//! A peer is handicapped when it is not the build a user of that engine would run: RocksDB
//! compiled from the source the `rocksdb` crate bundles (what its build script does, silently,
//! when `ROCKSDB_LIB_DIR` is unset) instead of the system library, or any peer driven by a
//! splitkv-bench that is not an optimised build. Such a run is refused unless
//! `--allow_handicapped_peer` is given, and then the header says so.
//!
//! The evidence is the process itself where it can be: a shared library is linked only if the
//! dynamic loader mapped it, so `/proc/self/maps` names the exact file (and, for RocksDB, the
//! version in its file name). What the maps cannot show (a static archive, bundled source) comes
//! from the build environment `build.rs` recorded, which is the one `librocksdb-sys`'s build
//! script decided by.

// Each peer's detection is used only when that peer is compiled in; the tests use all of it.
#![cfg_attr(not(all(feature = "leveldb", feature = "rocksdb", feature = "fjall")), allow(dead_code))]

use crate::flags::{EngineKind, Flags};

use super::BenchResult;

/// How a peer's code came into this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Linkage {
    /// A shared library the dynamic loader mapped from this file.
    SystemShared(String),
    /// A static archive from a system library directory.
    SystemStatic(String),
    /// A static archive of unknown origin (LevelDB when no shared library is mapped: the linker
    /// found `libleveldb.a`).
    Static,
    /// Compiled from the source a crate bundles, with that crate's build script's options.
    BundledSource,
    /// A Rust crate compiled into this binary with the workspace's profile.
    RustCrate,
    /// Built to link a shared library that the process does not map.
    Unknown(String),
}

impl Linkage {
    fn describe(&self) -> String {
        match self {
            Linkage::SystemShared(path) => format!("system shared library {path}"),
            Linkage::SystemStatic(dir) => format!("system static library from {dir}"),
            Linkage::Static => "statically linked archive".to_owned(),
            Linkage::BundledSource => "compiled from the crate's bundled source".to_owned(),
            Linkage::RustCrate => "Rust crate compiled into this binary".to_owned(),
            Linkage::Unknown(why) => format!("linkage unknown ({why})"),
        }
    }
}

/// A peer engine's version and how it was linked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerBuild {
    /// db_bench's name for the engine (`RocksDB`).
    pub name: &'static str,
    /// The engine's own version.
    pub version: String,
    /// How it came into this process.
    pub linkage: Linkage,
    /// The binding it is driven through, if any (`rust-rocksdb 0.20.1`).
    pub binding: Option<String>,
}

impl PeerBuild {
    /// db_bench's version line, with the linkage after it.
    pub fn line(&self) -> String {
        let binding = self.binding.as_ref().map(|b| format!(" (through {b})")).unwrap_or_default();
        let name = format!("{}:", self.name);
        format!("{name:<12}version {}, {}{binding}", self.version, self.linkage.describe())
    }
}

/// How splitkv-bench itself was compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchBuild {
    /// rustc's `-C opt-level` for this crate (`0`…`3`, `s`, `z`).
    pub opt_level: String,
    /// The cargo profile (`debug` or `release`).
    pub profile: String,
    /// Whether debug assertions are compiled in.
    pub debug_assertions: bool,
}

impl BenchBuild {
    /// This binary's build, as recorded at compile time.
    pub fn current() -> Self {
        BenchBuild {
            opt_level: env!("SPLITKV_BENCH_OPT_LEVEL").to_owned(),
            profile: env!("SPLITKV_BENCH_PROFILE").to_owned(),
            debug_assertions: cfg!(debug_assertions),
        }
    }

    /// Whether the harness code (key generation, timing, histograms) is optimised.
    pub fn optimised(&self) -> bool {
        self.opt_level != "0"
    }

    /// The header line about this build.
    pub fn line(&self) -> String {
        let kind = if self.optimised() { "optimised" } else { "UNOPTIMISED" };
        let assertions = if self.debug_assertions { "on" } else { "off" };
        format!(
            "Bench:      {kind} build (opt-level {}, {} profile, debug assertions {assertions})",
            self.opt_level, self.profile
        )
    }
}

/// Why a run of `peer` from `bench` would not measure the peer fairly, if it would not.
pub fn handicap(peer: &PeerBuild, bench: &BenchBuild) -> Option<String> {
    let mut reasons = Vec::new();
    if peer.linkage == Linkage::BundledSource {
        reasons.push(format!(
            "{} was compiled from the bundled source instead of linking the system library \
             (build with ROCKSDB_LIB_DIR set to the directory of librocksdb.so, as the repository's \
             .cargo/config.toml does)",
            peer.name
        ));
    }
    if !bench.optimised() {
        reasons.push(format!(
            "splitkv-bench is not an optimised build (opt-level {}); build it with --release",
            bench.opt_level
        ));
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// The file a shared library whose name starts with `lib{stem}.so` was mapped from, in the text
/// of `/proc/self/maps` (`address perms offset dev inode path`).
pub fn mapped_library<'a>(maps: &'a str, stem: &str) -> Option<&'a str> {
    let prefix = format!("lib{stem}.so");
    maps.lines().find_map(|line| {
        // The path is whatever follows the five fixed fields; it may contain spaces.
        let mut rest = line.trim_start();
        for _ in 0..5 {
            let end = rest.find(char::is_whitespace)?;
            rest = rest[end..].trim_start();
        }
        let path = rest.strip_suffix(" (deleted)").unwrap_or(rest).trim_end();
        let file = path.rsplit('/').next()?;
        file.starts_with(&prefix).then_some(path)
    })
}

/// The version in a shared library's file name: `librocksdb.so.7.8.3` gives `7.8.3`.
pub fn soname_version(path: &str) -> Option<&str> {
    let file = path.rsplit('/').next()?;
    let (_, version) = file.split_once(".so.")?;
    Some(version).filter(|v| !v.is_empty())
}

/// This process's memory map (empty where `/proc` is missing: nothing is then seen as mapped).
fn process_maps() -> String {
    std::fs::read_to_string("/proc/self/maps").unwrap_or_default()
}

/// A variable `build.rs` recorded as `set:VALUE`, or nothing when it was unset.
fn recorded(value: &'static str) -> Option<&'static str> {
    value.strip_prefix("set:")
}

/// RocksDB's linkage from the process maps and the build environment `librocksdb-sys` saw
/// (`ROCKSDB_LIB_DIR`, `ROCKSDB_STATIC`, `ROCKSDB_COMPILE`), and its version: from the shared
/// library's file name, or the RocksDB version `librocksdb-sys` bundles (`0.10.0+7.9.2`).
pub fn rocksdb_build(
    maps: &str,
    lib_dir: Option<&str>,
    static_lib: bool,
    compile: Option<&str>,
    sys_version: &str,
) -> (Linkage, String) {
    let bundled_version = sys_version.split_once('+').map_or(sys_version, |(_, v)| v);
    if let Some(path) = mapped_library(maps, "rocksdb") {
        let version = soname_version(path).unwrap_or("unknown");
        return (Linkage::SystemShared(path.to_owned()), version.to_owned());
    }
    let compiled = compile.is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    match lib_dir {
        Some(_) if compiled => (Linkage::BundledSource, bundled_version.to_owned()),
        Some(dir) if static_lib => (Linkage::SystemStatic(dir.to_owned()), "unknown".to_owned()),
        Some(dir) => (
            Linkage::Unknown(format!("built against the shared library in {dir}, which this process does not map")),
            "unknown".to_owned(),
        ),
        None => (Linkage::BundledSource, bundled_version.to_owned()),
    }
}

/// The selected peer's build, or `None` for splitkv.
pub fn peer_build(flags: &Flags) -> Option<PeerBuild> {
    match flags.engine {
        EngineKind::Splitkv => None,
        #[cfg(feature = "leveldb")]
        EngineKind::LevelDb => {
            let maps = process_maps();
            let linkage =
                mapped_library(&maps, "leveldb").map_or(Linkage::Static, |path| Linkage::SystemShared(path.to_owned()));
            Some(PeerBuild { name: "LevelDB", version: super::leveldb::version(), linkage, binding: None })
        }
        #[cfg(feature = "rocksdb")]
        EngineKind::RocksDb => {
            let (linkage, version) = rocksdb_build(
                &process_maps(),
                recorded(env!("SPLITKV_BENCH_ROCKSDB_LIB_DIR")),
                recorded(env!("SPLITKV_BENCH_ROCKSDB_STATIC")).is_some(),
                recorded(env!("SPLITKV_BENCH_ROCKSDB_COMPILE")),
                env!("SPLITKV_BENCH_LIBROCKSDB_SYS_VERSION"),
            );
            let binding = Some(format!("rust-rocksdb {}", env!("SPLITKV_BENCH_ROCKSDB_CRATE_VERSION")));
            Some(PeerBuild { name: "RocksDB", version, linkage, binding })
        }
        #[cfg(feature = "fjall")]
        EngineKind::Fjall => Some(PeerBuild {
            name: "fjall",
            version: env!("SPLITKV_BENCH_FJALL_VERSION").to_owned(),
            linkage: Linkage::RustCrate,
            binding: None,
        }),
        // Not built in: `ensure_built_in` has already refused the run.
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The engine's version line and the bench's build line, for the environment db_bench prints
/// to stderr; a handicapped peer that `--allow_handicapped_peer` let through is flagged there.
pub fn environment_lines(flags: &Flags) -> String {
    let bench = BenchBuild::current();
    let mut lines = super::version_line(flags);
    lines.push('\n');
    lines.push_str(&bench.line());
    // Without the flag the run is refused just after these lines, with the reason.
    if flags.allow_handicapped_peer {
        if let Some(reason) = peer_build(flags).and_then(|peer| handicap(&peer, &bench)) {
            lines.push_str(&format!("\nWARNING: handicapped peer: {reason}"));
        }
    }
    lines
}

/// Fails when the selected peer is handicapped, unless `--allow_handicapped_peer` was given.
pub fn refuse_handicapped_peer(flags: &Flags) -> BenchResult<()> {
    if flags.allow_handicapped_peer {
        return Ok(());
    }
    match peer_build(flags).and_then(|peer| handicap(&peer, &BenchBuild::current())) {
        Some(reason) => Err(format!(
            "refusing to benchmark a handicapped peer: {reason}. Pass --allow_handicapped_peer to run anyway"
        )
        .into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a40000 r--p 00000000 08:01 1311 /opt/bench/splitkv-bench
7f2a10000000-7f2a10200000 r-xp 00000000 08:01 2234 /usr/lib/x86_64-linux-gnu/librocksdb.so.7.8.3
7f2a10400000-7f2a10420000 r-xp 00000000 08:01 2240 /usr/lib/x86_64-linux-gnu/libleveldb.so.1.23.0
7f2a10500000-7f2a10520000 r-xp 00000000 08:01 2250 /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30
7f2a10600000-7f2a10620000 rw-p 00000000 00:00 0
7ffd5e1f0000-7ffd5e211000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn maps_name_the_mapped_shared_libraries() {
        assert_eq!(mapped_library(MAPS, "rocksdb"), Some("/usr/lib/x86_64-linux-gnu/librocksdb.so.7.8.3"));
        assert_eq!(mapped_library(MAPS, "leveldb"), Some("/usr/lib/x86_64-linux-gnu/libleveldb.so.1.23.0"));
        // A prefix of another library's name is not that library.
        assert_eq!(mapped_library(MAPS, "level"), None);
        assert_eq!(mapped_library(MAPS, "snappy"), None);
        let spaced = "7f00-7f01 r-xp 00000000 08:01 9 /opt/my libs/librocksdb.so.8.1.1 (deleted)\n";
        assert_eq!(mapped_library(spaced, "rocksdb"), Some("/opt/my libs/librocksdb.so.8.1.1"));
    }

    #[test]
    fn versions_come_from_library_file_names() {
        assert_eq!(soname_version("/usr/lib/x86_64-linux-gnu/librocksdb.so.7.8.3"), Some("7.8.3"));
        assert_eq!(soname_version("/usr/lib/librocksdb.so"), None);
    }

    #[test]
    fn rocksdb_linkage_prefers_what_the_process_maps() {
        let sys = "0.10.0+7.9.2";
        let shared = rocksdb_build(MAPS, Some("/usr/lib/x86_64-linux-gnu"), false, None, sys);
        assert_eq!(
            shared,
            (Linkage::SystemShared("/usr/lib/x86_64-linux-gnu/librocksdb.so.7.8.3".to_owned()), "7.8.3".to_owned())
        );
        // No ROCKSDB_LIB_DIR: librocksdb-sys compiled its bundled source.
        assert_eq!(rocksdb_build("", None, false, None, sys), (Linkage::BundledSource, "7.9.2".to_owned()));
        assert_eq!(rocksdb_build("", Some("/x"), false, Some("1"), sys).0, Linkage::BundledSource);
        assert_eq!(rocksdb_build("", Some("/x"), true, None, sys).0, Linkage::SystemStatic("/x".to_owned()));
        assert!(matches!(rocksdb_build("", Some("/x"), false, None, sys).0, Linkage::Unknown(_)));
    }

    #[test]
    fn bundled_or_unoptimised_peers_are_handicapped() {
        let optimised =
            BenchBuild { opt_level: "3".to_owned(), profile: "release".to_owned(), debug_assertions: false };
        let debug = BenchBuild { opt_level: "0".to_owned(), profile: "debug".to_owned(), debug_assertions: true };
        let system = PeerBuild {
            name: "RocksDB",
            version: "7.8.3".to_owned(),
            linkage: Linkage::SystemShared("/usr/lib/librocksdb.so.7.8.3".to_owned()),
            binding: None,
        };
        let bundled = PeerBuild { linkage: Linkage::BundledSource, ..system.clone() };
        assert_eq!(handicap(&system, &optimised), None);
        assert!(handicap(&bundled, &optimised).unwrap().contains("bundled source"));
        assert!(handicap(&system, &debug).unwrap().contains("not an optimised build"));
        let both = handicap(&bundled, &debug).unwrap();
        assert!(both.contains("bundled") && both.contains("--release"));
        assert_eq!(system.line(), "RocksDB:    version 7.8.3, system shared library /usr/lib/librocksdb.so.7.8.3");
        assert!(debug.line().contains("UNOPTIMISED"));
    }

    /// This test binary's own maps: whichever peers the build links dynamically are visible.
    #[cfg(feature = "leveldb")]
    #[test]
    fn this_process_maps_the_system_leveldb() {
        // Calling into the library keeps the linker from dropping it as unneeded.
        assert!(super::super::leveldb::version().starts_with('1'));
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let path = mapped_library(&maps, "leveldb").expect("libleveldb.so is mapped");
        assert!(path.contains("libleveldb.so"));
    }
}
