//! Links the system LevelDB only when the `leveldb` feature is on, so the default build needs
//! nothing but cargo; and records how this binary and its peer engines were built, so that the
//! benchmark header can say so and refuse a handicapped peer (see `engines::provenance`).
//!
//! Recorded as `SPLITKV_BENCH_*` compile-time variables: this crate's optimisation level and
//! profile; the variables `librocksdb-sys`'s build script decides by (`ROCKSDB_LIB_DIR`: link the
//! library found there, dynamically unless `ROCKSDB_STATIC` is set; otherwise, or with
//! `ROCKSDB_COMPILE`, compile the bundled source); and the locked versions of the peer crates.
//! Cargo gives every build script of one build the same environment, so what this script sees is
//! what `librocksdb-sys`'s saw.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_LEVELDB").is_some() {
        println!("cargo:rustc-link-lib=leveldb");
    }

    for (name, value) in [("OPT_LEVEL", "SPLITKV_BENCH_OPT_LEVEL"), ("PROFILE", "SPLITKV_BENCH_PROFILE")] {
        let text = std::env::var(name).unwrap_or_default();
        println!("cargo:rustc-env={value}={text}");
    }
    for name in ["ROCKSDB_LIB_DIR", "ROCKSDB_STATIC", "ROCKSDB_COMPILE"] {
        println!("cargo:rerun-if-env-changed={name}");
        // `librocksdb-sys` tests ROCKSDB_STATIC for presence only, so an empty value still counts:
        // record presence as a leading marker.
        let text = std::env::var(name).map(|v| format!("set:{v}")).unwrap_or_default();
        println!("cargo:rustc-env=SPLITKV_BENCH_{name}={text}");
    }

    // The workspace's lock file names the exact peer crate versions this build uses.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let lock_path = Path::new(&manifest_dir).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    for (package, variable) in [
        ("rocksdb", "SPLITKV_BENCH_ROCKSDB_CRATE_VERSION"),
        ("librocksdb-sys", "SPLITKV_BENCH_LIBROCKSDB_SYS_VERSION"),
        ("fjall", "SPLITKV_BENCH_FJALL_VERSION"),
    ] {
        let version = locked_version(&lock, package).unwrap_or("unknown");
        println!("cargo:rustc-env={variable}={version}");
    }
}

/// The version of `package` in a Cargo.lock (`name = "…"` followed by `version = "…"`).
fn locked_version<'a>(lock: &'a str, package: &str) -> Option<&'a str> {
    let name_line = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name_line {
            let version = lines.next()?.trim().strip_prefix("version = \"")?;
            return version.strip_suffix('"');
        }
    }
    None
}
