//! Links the system LevelDB only when the `leveldb` feature is on, so the default build needs
//! nothing but cargo.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_LEVELDB").is_some() {
        println!("cargo:rustc-link-lib=leveldb");
    }
}
