//! `--memory_limit=SIZE`: runs the benchmark inside a memory cgroup (cgroup v1) of that size, so
//! an engine is measured the way it runs on a machine whose memory is smaller than its data.
//!
//! The group is created next to (below) the memory group the process is already in, its
//! `memory.limit_in_bytes` is set to SIZE, and the process moves itself into it by writing its
//! PID to `cgroup.procs` before the database is opened. Cgroup v1 charges a page-cache page to
//! the group of the task that first brings it in, so every page of the database files the engine
//! reads or writes from then on counts against the limit together with the heap: when the group
//! reaches it, the kernel reclaims the group's own page cache first (and the process is killed by
//! the OOM killer only if heap alone exceeds it). That is the regime of a small machine, which
//! `--cache_size` alone cannot give: without the group the OS page cache quietly holds the data.
//!
//! On drop the process moves back to the group it came from and the group is removed (its
//! remaining charges go to the parent), so nothing is left behind after a normal exit or an
//! error. Creating a group needs the cgroup-v1 memory controller mounted and the right to write
//! to it (root); if either is missing the benchmark refuses to start rather than run unlimited.

use std::fs;
use std::path::{Path, PathBuf};

/// A memory cgroup this process is in for as long as the value lives.
#[derive(Debug)]
pub struct MemoryLimit {
    /// The group's directory.
    dir: PathBuf,
    /// The group the process came from, to move back to before removing `dir`.
    previous: PathBuf,
    /// The limit in bytes.
    bytes: u64,
}

impl MemoryLimit {
    /// Creates a group limited to `bytes`, moves this process into it and returns its guard.
    pub fn enter(bytes: u64) -> Result<MemoryLimit, String> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("--memory_limit: cannot read /proc/self/mountinfo: {e}"))?;
        let cgroups = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("--memory_limit: cannot read /proc/self/cgroup: {e}"))?;
        let (mount, mount_root) = memory_mount(&mountinfo).ok_or(
            "--memory_limit: the cgroup-v1 memory controller is not mounted (cgroup v2 alone is not supported)",
        )?;
        let previous = current_group(&cgroups)
            .and_then(|path| group_dir(&mount, &mount_root, &path))
            .filter(|dir| dir.join("cgroup.procs").exists())
            .unwrap_or_else(|| mount.clone());
        let dir = previous.join(unique_name());
        fs::create_dir(&dir).map_err(|e| format!("--memory_limit: cannot create cgroup {}: {e}", dir.display()))?;
        // From here on the guard removes the group, whatever fails next.
        let limit = MemoryLimit { dir, previous, bytes };
        limit.write("memory.limit_in_bytes", &bytes.to_string())?;
        // The kernel rounds the limit down to a page; a limit it did not take would mean an
        // unlimited run reported as limited.
        let applied = limit.read("memory.limit_in_bytes")?;
        if applied > bytes || applied + 4096 <= bytes {
            return Err(format!("--memory_limit: the kernel set the limit to {applied}, not {bytes}"));
        }
        limit.write("cgroup.procs", &std::process::id().to_string())?;
        Ok(limit)
    }

    /// The header line describing the regime.
    pub fn header_line(limit: Option<&MemoryLimit>) -> String {
        match limit {
            Some(limit) => {
                format!("memory limit: {} (cgroup v1, page cache included)", format_size(limit.bytes))
            }
            None => "memory limit: none".to_owned(),
        }
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let path = self.dir.join(file);
        fs::write(&path, value).map_err(|e| format!("--memory_limit: cannot write {value} to {}: {e}", path.display()))
    }

    fn read(&self, file: &str) -> Result<u64, String> {
        let path = self.dir.join(file);
        let text = fs::read_to_string(&path).map_err(|e| format!("--memory_limit: {}: {e}", path.display()))?;
        text.trim().parse().map_err(|_| format!("--memory_limit: {}: not a number: {text}", path.display()))
    }
}

impl Drop for MemoryLimit {
    fn drop(&mut self) {
        // A group with a task in it cannot be removed; moving out first is what makes `rmdir`
        // possible. Both are best effort: a failure leaves an empty group, reported, not a crash.
        let _ = fs::write(self.previous.join("cgroup.procs"), std::process::id().to_string());
        if let Err(e) = fs::remove_dir(&self.dir) {
            eprintln!("--memory_limit: could not remove cgroup {}: {e}", self.dir.display());
        }
    }
}

/// A name no other run uses at the same time: the PID, and the time for PID reuse.
fn unique_name() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("splitkv-bench-{}-{nanos}", std::process::id())
}

/// The mount point of the cgroup-v1 memory hierarchy and the group path its root shows, from
/// `/proc/self/mountinfo` (`id parent major:minor root mount-point options ... - fstype source
/// super-options`).
fn memory_mount(mountinfo: &str) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|line| {
        let (mount_part, fs_part) = line.split_once(" - ")?;
        let mut fs_fields = fs_part.split_whitespace();
        let (fstype, _source, options) = (fs_fields.next()?, fs_fields.next()?, fs_fields.next()?);
        if fstype != "cgroup" || !options.split(',').any(|o| o == "memory") {
            return None;
        }
        let mut fields = mount_part.split_whitespace();
        let root = fields.nth(3)?;
        let mount_point = fields.next()?;
        Some((PathBuf::from(mount_point), root.to_owned()))
    })
}

/// The memory group path of this process from `/proc/self/cgroup` (`id:controllers:path`).
fn current_group(cgroups: &str) -> Option<String> {
    cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "memory").then(|| path.to_owned())
    })
}

/// The directory of group `path` under a mount whose root is group `mount_root`.
fn group_dir(mount: &Path, mount_root: &str, path: &str) -> Option<PathBuf> {
    let relative = path.strip_prefix(mount_root.trim_end_matches('/'))?;
    Some(mount.join(relative.trim_start_matches('/')))
}

/// Parses a size: a number of bytes, optionally followed by `K`, `M`, `G` (or `KiB`, `MiB`,
/// `GiB`, `KB`, ...); every suffix is a power of 1024.
pub fn parse_size(text: &str) -> Option<u64> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    number.checked_mul(1u64 << shift).filter(|&bytes| bytes > 0)
}

/// `bytes` in the largest binary unit that divides it, or MiB with a fraction.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    if bytes >= 1 << 20 {
        return format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20));
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1KB"), Some(1024));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("MiB"), None);
        assert_eq!(parse_size("12XB"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
        assert_eq!(format_size(512 << 20), "512 MiB");
        assert_eq!(format_size(3 << 30), "3 GiB");
        assert_eq!(format_size((1 << 20) + (1 << 19) + 1), "1.5 MiB");
        assert_eq!(format_size(100), "100 bytes");
    }

    #[test]
    fn finds_the_memory_hierarchy_and_the_current_group() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
31 25 0:27 / /sys/fs/cgroup/memory rw,relatime shared:10 - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";
        let (mount, root) = memory_mount(mountinfo).unwrap();
        assert_eq!(mount, PathBuf::from("/sys/fs/cgroup/memory"));
        assert_eq!(root, "/");
        assert_eq!(memory_mount("32 25 0:28 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw"), None);
        let cgroups = "9:name=systemd:/\n4:memory:/jobs/abc\n0::/";
        assert_eq!(current_group(cgroups).as_deref(), Some("/jobs/abc"));
        assert_eq!(group_dir(&mount, &root, "/jobs/abc"), Some(PathBuf::from("/sys/fs/cgroup/memory/jobs/abc")));
        // A namespaced mount whose root is a group of its own.
        assert_eq!(group_dir(&mount, "/jobs", "/jobs/abc"), Some(PathBuf::from("/sys/fs/cgroup/memory/abc")));
        assert_eq!(group_dir(&mount, "/other", "/jobs/abc"), None);
        assert_eq!(MemoryLimit::header_line(None), "memory limit: none");
    }
}
